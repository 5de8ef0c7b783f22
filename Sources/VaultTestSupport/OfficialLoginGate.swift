import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1

/// A gate in front of the real VaultSync server that adds the login steps only the official
/// Bitwarden server has, answering exactly as it does (docs/PROTOCOL.md, "Two-step login" and
/// "New-device verification"): two-step login by emailed code, and the emailed new-device code.
/// Everything else, and every login the gate lets through, goes to the real server unchanged.
///
/// The gate's "mailbox" holds the codes it would have mailed, so a test reads them as a person
/// reads their email. (Only for the flows VaultSync's server has no mail for; authenticator codes,
/// remember tokens of the authenticator and API keys are tested against the real server.)
public actor OfficialLoginGate {
    /// What the gate asks for.
    public struct Rules: Sendable {
        /// Ask for an emailed two-step code (provider 1), with this masked address in the challenge.
        public var emailTwoFactor: Bool
        public var maskedEmail: String
        /// Also list these providers in the challenge (e.g. YubiKey 3, WebAuthn 7), which the gate
        /// never accepts: for the "not supported" messages.
        public var otherProviders: [Int]
        /// Ask a device the gate has not seen for an emailed new-device code (password logins only).
        public var newDeviceVerification: Bool

        public init(emailTwoFactor: Bool = false, maskedEmail: String = "te*****@example.com", otherProviders: [Int] = [],
                    newDeviceVerification: Bool = false) {
            self.emailTwoFactor = emailTwoFactor
            self.maskedEmail = maskedEmail
            self.otherProviders = otherProviders
            self.newDeviceVerification = newDeviceVerification
        }
    }

    /// One request the gate saw (its path and form or JSON fields), for tests to check what was sent.
    public struct Seen: Sendable {
        public var path: String
        public var fields: [String: String]
    }

    public private(set) var port = 0
    private var run: LoopbackRun?
    private let upstream: String
    private let state: GateState

    public init(upstream: String, rules: Rules) {
        self.upstream = upstream
        state = GateState(rules: rules)
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    /// The codes mailed so far, newest last.
    public nonisolated var mailbox: [String] { state.read { $0.mailbox } }
    /// Every request to the token endpoint and the code-mailing routes, in order.
    public nonisolated var seen: [Seen] { state.read { $0.seen } }
    /// Remember tokens the gate issued and still accepts.
    public nonisolated var rememberTokens: Set<String> { state.read { $0.rememberTokens } }

    /// Forgets every remember token (as a password change would).
    public nonisolated func revokeRememberTokens() {
        state.update { $0.rememberTokens.removeAll() }
    }

    public func start() async throws {
        let state = state
        let upstream = upstream
        let router = Router()
        for method in [HTTPRequest.Method.get, .post, .put, .delete] {
            router.on("**", method: method) { request, _ -> Response in
                try await Self.handle(request, method: method, state: state, upstream: upstream)
            }
        }
        let run = try await LoopbackRun.start(router: router, label: "official-login-gate")
        self.run = run
        port = run.port
    }

    public func stop() async {
        await run?.stop()
        run = nil
    }

    private static func handle(_ request: Request, method: HTTPRequest.Method, state: GateState, upstream: String) async throws -> Response {
        let body = try await request.body.collect(upTo: 16 * 1024 * 1024)
        let bytes = Array(body.readableBytesView)
        if method == .post, request.uri.path == "/identity/connect/token" {
            // As on the official server, the password is checked first (by the real server): a wrong
            // one is refused as such, whatever the second factor.
            state.update { $0.seen.append(.init(path: "/identity/connect/token", fields: GateState.form(bytes))) }
            let answer = try await forward(request, body: bytes, upstream: upstream, method: method)
            guard answer.status == 200, let decision = state.tokenRequest(GateState.form(bytes)) else { return answer.response }
            switch decision {
            case .reply(let status, let json):
                return reply(status, json)
            case .forward(let rememberToken):
                guard let rememberToken else { return answer.response }
                return OfficialLoginGate.Answer(status: 200, contentType: answer.contentType,
                                                body: addingField("TwoFactorToken", rememberToken, to: answer.body)).response
            }
        }
        if method == .post, let answer = state.intercept(path: request.uri.path, body: bytes) {
            guard case .reply(let status, let json) = answer else { return try await forward(request, body: bytes, upstream: upstream, method: method).response }
            return reply(status, json)
        }
        return try await forward(request, body: bytes, upstream: upstream, method: method).response
    }

    private static func reply(_ status: Int, _ json: String) -> Response {
        Response(status: .init(code: status), headers: [.contentType: "application/json; charset=utf-8"],
                 body: .init(byteBuffer: ByteBuffer(bytes: Array(json.utf8))))
    }

    /// The real server's answer.
    struct Answer {
        var status: Int
        var contentType: String
        var body: [UInt8]

        var response: Response {
            Response(status: .init(code: status), headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
    }

    static let client: HTTPClient = HTTPClient(eventLoopGroupProvider: .singleton)

    private static func forward(_ request: Request, body: [UInt8], upstream: String, method: HTTPRequest.Method) async throws -> Answer {
        var outgoing = HTTPClientRequest(url: upstream + request.uri.description)
        outgoing.method = HTTPMethod(rawValue: method.rawValue)
        for field in request.headers where field.name != .contentLength {
            outgoing.headers.add(name: field.name.rawName, value: field.value)
        }
        if !body.isEmpty { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        let answer = try await client.execute(outgoing, timeout: .seconds(30))
        let bytes = Array(try await answer.body.collect(upTo: 256 * 1024 * 1024).readableBytesView)
        return Answer(status: Int(answer.status.code), contentType: answer.headers.first(name: "Content-Type") ?? "application/json; charset=utf-8",
                      body: bytes)
    }

    /// `object` with `"name": "value"` added before its closing brace.
    static func addingField(_ name: String, _ value: String, to object: [UInt8]) -> [UInt8] {
        guard let close = object.lastIndex(of: UInt8(ascii: "}")) else { return object }
        return Array(object[..<close]) + Array(",\"\(name)\":\"\(value)\"".utf8) + Array(object[close...])
    }
}

/// The gate's state, read and changed from request handlers (a lock, no awaits inside).
final class GateState: @unchecked Sendable {
    enum Answer {
        case reply(status: Int, json: String)
        /// Let the login through to the real server; add this remember token to its answer.
        case forward(addRememberToken: String?)
    }

    struct Values {
        var rules: OfficialLoginGate.Rules
        var mailbox: [String] = []
        var seen: [OfficialLoginGate.Seen] = []
        /// The current emailed two-step code and new-device code (single use, as on the official server).
        var emailCode: String?
        var newDeviceCode: String?
        var sessionTokens: Set<String> = []
        var rememberTokens: Set<String> = []
        var knownDevices: Set<String> = []
    }

    private let lock = NSLock()
    private var values: Values

    init(rules: OfficialLoginGate.Rules) {
        values = Values(rules: rules)
    }

    func read<T>(_ body: (Values) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(values)
    }

    func update(_ body: (inout Values) -> Void) {
        lock.lock()
        body(&values)
        lock.unlock()
    }

    static func code(digits: Int) -> String {
        String((0..<digits).map { _ in Character(String(Int.random(in: 0...9))) })
    }

    /// The official server's 400 bodies (docs/PROTOCOL.md).
    static let newDeviceRequired = """
        {"error":"device_error","error_description":"New device verification required","ErrorModel":{"Message":"new device verification required","Object":"error"}}
        """
    static let newDeviceInvalid = """
        {"error":"device_error","error_description":"Invalid New Device OTP","ErrorModel":{"Message":"invalid new device otp","Object":"error"}}
        """
    static let codeInvalid = """
        {"error":"invalid_grant","error_description":"invalid_username_or_password","ErrorModel":{"Message":"Two-step token is invalid. Try again.","Object":"error"}}
        """

    func intercept(path: String, body: [UInt8]) -> Answer? {
        lock.lock()
        defer { lock.unlock() }
        switch path {
        case "/api/two-factor/send-email-login":
            let fields = Self.json(body)
            values.seen.append(.init(path: path, fields: fields))
            // The official server needs the email and one proof (here the password hash and its session token).
            guard values.rules.emailTwoFactor, fields["email"]?.isEmpty == false, fields["masterPasswordHash"]?.isEmpty == false,
                  let token = fields["ssoEmail2FaSessionToken"], values.sessionTokens.contains(token) else {
                return .reply(status: 400, json: #"{"message":"Cannot send two-factor email.","validationErrors":null,"exceptionMessage":null,"exceptionStackTrace":null,"innerExceptionMessage":null,"object":"error"}"#)
            }
            let code = Self.code(digits: 6)
            values.emailCode = code
            values.mailbox.append(code)
            return .reply(status: 200, json: "")
        case "/api/accounts/resend-new-device-otp":
            let fields = Self.json(body)
            values.seen.append(.init(path: path, fields: fields))
            // Always 200, whatever was sent (it must not tell whether the account exists).
            if values.rules.newDeviceVerification, fields["email"]?.isEmpty == false, fields["masterPasswordHash"]?.isEmpty == false {
                let code = Self.code(digits: 8)
                values.newDeviceCode = code
                values.mailbox.append(code)
            }
            return .reply(status: 200, json: "")
        default:
            return nil
        }
    }

    /// The gate's decision on a login whose password the real server accepted (`nil`: let it through).
    func tokenRequest(_ fields: [String: String]) -> Answer? {
        lock.lock()
        defer { lock.unlock() }
        guard fields["grant_type"] == "password" else { return nil }
        let device = fields["deviceIdentifier"] ?? ""
        if values.rules.emailTwoFactor {
            let provider = fields["twoFactorProvider"]
            let token = fields["twoFactorToken"] ?? ""
            var passed = false
            if provider == "5", values.rememberTokens.contains(token) {
                passed = true
            } else if provider == "1", !token.isEmpty {
                guard let expected = values.emailCode, token == expected else { return .reply(status: 400, json: Self.codeInvalid) }
                values.emailCode = nil
                passed = true
            }
            if !passed {
                // Like the official server: a fresh session token for the email request, the masked address.
                let session = "BwSsoEmail2FaSessionToken_" + UUID().uuidString
                values.sessionTokens.insert(session)
                let providers = ["1"] + values.rules.otherProviders.map(String.init)
                var providers2 = ["\"1\":{\"Email\":\"\(values.rules.maskedEmail)\"}"]
                for other in values.rules.otherProviders {
                    providers2.append(other == 3 ? "\"3\":{\"Nfc\":true}" : "\"\(other)\":null")
                }
                let body = """
                    {"error":"invalid_grant","error_description":"Two factor required.",\
                    "TwoFactorProviders":[\(providers.map { "\"\($0)\"" }.joined(separator: ","))],\
                    "TwoFactorProviders2":{\(providers2.joined(separator: ","))},\
                    "SsoEmail2faSessionToken":"\(session)","Email":"\(fields["username"] ?? "")",\
                    "MasterPasswordPolicy":{"Object":"masterPasswordPolicy"}}
                    """
                return .reply(status: 400, json: body)
            }
            values.knownDevices.insert(device)
            if fields["twoFactorRemember"] == "1", provider != "5" {
                let remember = "remember-" + UUID().uuidString
                values.rememberTokens.insert(remember)
                return .forward(addRememberToken: remember)
            }
            return .forward(addRememberToken: nil)
        }
        if values.rules.newDeviceVerification, !values.knownDevices.contains(device) {
            if let otp = fields["newDeviceOtp"] {
                guard let expected = values.newDeviceCode, otp == expected else { return .reply(status: 400, json: Self.newDeviceInvalid) }
                values.newDeviceCode = nil
                values.knownDevices.insert(device)
                return .forward(addRememberToken: nil)
            }
            // The official server mails the code with this answer.
            let code = Self.code(digits: 8)
            values.newDeviceCode = code
            values.mailbox.append(code)
            return .reply(status: 400, json: Self.newDeviceRequired)
        }
        return nil
    }

    static func form(_ body: [UInt8]) -> [String: String] {
        var result: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = parts[0].removingPercentEncoding ?? String(parts[0])
            result[key] = parts.count > 1 ? (parts[1].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
        }
        return result
    }

    static func json(_ body: [UInt8]) -> [String: String] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else { return [:] }
        return object.compactMapValues { $0 as? String }
    }
}
