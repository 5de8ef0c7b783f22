import Foundation
import Hummingbird
import VaultModels

/// An error answered to the client in the official Bitwarden shape, plus Vaultwarden's `errorModel`
/// (spec §3.3).
public struct APIError: Error, Sendable {
    public var status: HTTPResponse.Status
    public var message: String
    public var validationErrors: [String: [String]]?
    /// For the identity endpoint: OAuth `error` / `error_description`.
    public var oauthError: (error: String, description: String)?
    /// A body answered exactly as given instead of the usual shape (the token endpoint's "Two factor
    /// required." and `invalid_client` answers).
    var exactBody: JSONObject?
    /// A `410` to a repeated create: the id of what the key made (`createdId`, a VaultSync extension).
    var createdID: String?

    public init(_ status: HTTPResponse.Status, _ message: String, validationErrors: [String: [String]]? = nil) {
        self.status = status
        self.message = message
        self.validationErrors = validationErrors
    }

    /// 404 "Resource not found." — for anything missing or not visible to the caller.
    public static let notFound = APIError(.notFound, "Resource not found.")
    /// 401 for a missing, invalid or expired access token.
    public static let unauthorized = APIError(.unauthorized, "Unauthorized.")

    /// 403 with the official message, for a member whose access to an item or collection does not allow the
    /// change (read-only, or not a manager of the collection). The official server answers 400 here; 403
    /// says what it is, and clients treat every 4xx but 408 and 429 as a refusal either way.
    public static let cannotEdit = APIError(.forbidden, "You do not have permissions to edit this.")
    public static let cannotDelete = APIError(.forbidden, "You do not have permissions to delete this.")

    /// 400 with the official stale-edit message (spec §3.2).
    public static let outOfDate = APIError(
        .badRequest, "The item cannot be saved because it is out of date. To edit this item, first sync your vault, or log out and back in.")

    /// 429 "Too many WHAT. Try again in N seconds." with `Retry-After`.
    public static func tooMany(_ what: String, wait: Double) -> APIError {
        let seconds = max(1, Int(wait.rounded(.up)))
        var error = APIError(.tooManyRequests, "Too many \(what). Try again in \(seconds) second\(seconds == 1 ? "" : "s").")
        error.retryAfter = wait
        return error
    }

    /// 400 "The model state is invalid." with per-field messages.
    public static func invalidModel(_ errors: [String: [String]]) -> APIError {
        APIError(.badRequest, "The model state is invalid.", validationErrors: errors)
    }

    /// 400 from a model error, naming the field.
    public static func from(_ error: ModelError) -> APIError {
        switch error {
        case .invalidJSON(let offset, let reason):
            return invalidModel(["": ["The request body is not valid JSON (byte \(offset): \(reason))."]])
        case .invalidValue(let path, let reason):
            let field = fieldName(path)
            if reason.hasPrefix("not a valid encrypted string") {
                return invalidModel([field: ["\(field) is not a valid encrypted string."]])
            }
            return invalidModel([field: ["\(field) is invalid: \(reason)."]])
        case .missingField(let path):
            let field = fieldName(path)
            return invalidModel([field: ["The \(field) field is required."]])
        case .wrongType(let path, let expected, let found):
            let field = fieldName(path)
            return invalidModel([field: ["\(field) should be \(expected), found \(found)."]])
        default:
            return APIError(.badRequest, error.description)
        }
    }

    /// `$.login.password` → `login.password`.
    static func fieldName(_ path: String) -> String {
        var name = path
        if name.hasPrefix("$.") { name.removeFirst(2) } else if name == "$" { name = "" }
        return name
    }

    /// The response body.
    func body() -> JSONObject {
        if let exactBody { return exactBody }
        if let oauthError {
            var object = JSONObject()
            object["error"] = .string(oauthError.error)
            object["error_description"] = .string(oauthError.description)
            object["ErrorModel"] = .object(["Message": .string(message), "Object": .string("error")])
            return object
        }
        var object = JSONObject()
        object["message"] = .string(message)
        if let validationErrors {
            var errors = JSONObject()
            for (field, messages) in validationErrors.sorted(by: { $0.key < $1.key }) {
                errors[field] = .array(messages.map(JSONValue.string))
            }
            object["validationErrors"] = .object(errors)
        } else {
            object["validationErrors"] = .null
        }
        object["exceptionMessage"] = .null
        object["exceptionStackTrace"] = .null
        object["innerExceptionMessage"] = .null
        object["errorModel"] = .object(["message": .string(message), "object": .string("error")])
        object["object"] = .string("error")
        if let createdID { object["createdId"] = .string(createdID) }
        return object
    }

    func response() -> Response {
        var response = JSONResponse.make(.object(body()), status: status)
        if status == .tooManyRequests, let retry = retryAfter {
            response.headers[.retryAfter] = String(Int(retry.rounded(.up)))
        }
        return response
    }

    var retryAfter: Double?
}

/// JSON responses from ``JSONValue`` without going through `Codable`.
enum JSONResponse {
    static func make(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        make(bytes: value.serialized(), status: status)
    }

    static func make(bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        var buffer = ByteBuffer()
        buffer.writeBytes(bytes)
        return Response(status: status, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: buffer))
    }

    static func empty() -> Response {
        Response(status: .ok, headers: [.contentLength: "0"])
    }

    /// `{"object":"list","data":[…],"continuationToken":null}` from already-serialized items.
    static func list(_ items: [[UInt8]]) -> Response {
        var bytes = Array(#"{"object":"list","data":["#.utf8)
        for (index, item) in items.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: item)
        }
        bytes.append(contentsOf: #"],"continuationToken":null}"#.utf8)
        return make(bytes: bytes)
    }
}

/// Turns every error into the official error body; unexpected ones become 500 and are logged
/// (without request bodies, which may hold secrets).
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            return response
        } catch let error as APIError {
            return error.response()
        } catch let error as ModelError {
            return APIError.from(error).response()
        } catch let error as HTTPError {
            switch error.status {
            case .notFound: return APIError.notFound.response()
            case .contentTooLarge: return APIError(.contentTooLarge, "The request body is too large.").response()
            case .unauthorized: return APIError.unauthorized.response()
            case .methodNotAllowed: return APIError(.methodNotAllowed, "Method not allowed.").response()
            default: return APIError(error.status, error.body ?? error.status.reasonPhrase).response()
            }
        } catch StorageError.uniqueViolation {
            // A client's input that collides with stored data (a taken id): the client's fault, and the answer
            // says nothing about what it collided with. The routes that take a client's id refuse it before
            // this; this is the rule for any that does not.
            return APIError(.badRequest, "The request conflicts with data already stored.").response()
        } catch {
            context.logger.error("unhandled error", metadata: ["error": "\(String(describing: type(of: error)))", "path": "\(request.uri.path)"])
            return APIError(.internalServerError, "An unhandled server error has occurred.").response()
        }
    }
}
