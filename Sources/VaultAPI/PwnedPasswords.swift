import Logging
import NIOCore
import NIOHTTP1
import VaultCrypto

extension BitwardenAPI {
    /// Have I Been Pwned's Pwned Passwords service, where Bitwarden's clients ask it.
    public static let pwnedPasswordsURL = "https://api.pwnedpasswords.com"

    /// How many times `password` appears in the Pwned Passwords breach corpus (0 when never): only the
    /// first five hex digits of its SHA-1 are sent (``PwnedPasswordHash``), with padding asked for so the
    /// answer's size says nothing either. The request carries none of this API's headers or tokens.
    public func timesExposed(password: String, serviceURL: String = BitwardenAPI.pwnedPasswordsURL) async throws -> Int {
        let (prefix, suffix) = PwnedPasswordHash.split(password)
        var headers = HTTPHeaders()
        headers.add(name: "Add-Padding", value: "true")
        let base = serviceURL.hasSuffix("/") ? String(serviceURL.dropLast()) : serviceURL
        let request = TransportRequest(method: .GET, url: base + "/range/" + prefix, headers: headers, body: nil,
                                       timeout: configuration.requestTimeout)
        let response: TransportResponse
        do {
            response = try await transport.execute(request, logger: logger)
        } catch {
            throw await failure(of: error)
        }
        guard (200..<300).contains(response.status) else {
            throw ServerCallError.http(status: response.status, message: "the Pwned Passwords service answered \(response.status)")
        }
        return PwnedPasswordHash.count(of: suffix, inRange: String(decoding: response.body, as: UTF8.self))
    }
}
