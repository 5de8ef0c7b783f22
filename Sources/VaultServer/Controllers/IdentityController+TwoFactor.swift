import Foundation
import Hummingbird
import VaultCrypto
import VaultModels

/// Two-step login at the token endpoint (docs/PROTOCOL.md, "Two-step login").
extension IdentityController {
    /// How long a remember token stands, in microseconds (30 days, as the official server).
    static let rememberLifetime: Int64 = 30 * 86_400 * 1_000_000

    /// What the second step of a password login came to: passed (or not needed), and whether the answer
    /// carries a new remember token, or the recovery code turned two-step login off.
    struct TwoFactorOutcome {
        var remember = false
        var recovered = false
    }

    /// 400 with the providers the account can use, in the official shape (no `ErrorModel`).
    static func twoFactorRequired(_ types: [Int]) -> APIError {
        var providers2 = JSONObject()
        for type in types { providers2[String(type)] = .null }
        var body = JSONObject()
        body["error"] = .string("invalid_grant")
        body["error_description"] = .string("Two factor required.")
        body["TwoFactorProviders"] = .array(types.map { .string(String($0)) })
        body["TwoFactorProviders2"] = .object(providers2)
        body["MasterPasswordPolicy"] = .object(["Object": .string("masterPasswordPolicy")])
        var error = APIError(.badRequest, "Two factor required.")
        error.exactBody = body
        return error
    }

    static let invalidTwoFactorToken = grantError("invalid_username_or_password", message: "Two-step token is invalid. Try again.")

    /// The second step of a password login whose password was right. Without two-step login set up it
    /// passes. Otherwise the request must carry `twoFactorProvider` and `twoFactorToken`:
    /// - 0 (authenticator): a code for this or the neighbouring time step, later than the last one used;
    /// - 5 (remember): this device's remember token; anything else asks for a code again;
    /// - 8 (recovery code): turns two-step login off and makes a new recovery code.
    /// Wrong codes and recovery codes count towards the account's lockout; a right one resets it.
    func twoFactorStep(_ field: (String) -> String?, user: UserRecord, device: String) async throws -> TwoFactorOutcome {
        let state = try await services.repository.twoFactorState(userID: user.id)
        guard state.isEnabled else { return TwoFactorOutcome() }
        let required = Self.twoFactorRequired(state.enabledTypes)
        guard let token = field("twoFactorToken")?.filter({ !$0.isWhitespace }), !token.isEmpty, token.count <= 1024,
              let provider = field("twoFactorProvider").flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) else {
            throw required
        }
        let rememberAsked = field("twoFactorRemember") == "1"
        switch provider {
        case TwoFactorProvider.remember:
            guard try await services.repository.isRemembered(
                userID: user.id, identifier: device, tokenHash: RefreshTokens.hash(token), stamp: user.securityStamp,
                now: services.now()) else { throw required }
            return TwoFactorOutcome()
        case TwoFactorProvider.recoveryCode:
            try await lockoutCheck(user)
            guard try await services.repository.recoverTwoFactor(userID: user.id, code: AccountSecrets.normaliseRecoveryCode(token)) else {
                try await wrongCode(user)
                throw Self.invalidTwoFactorToken
            }
            try await services.twoFactorLimiter.recordSuccess(account: user.id, address: "")
            services.logger.info("two-step login recovered", metadata: ["user": "\(user.id)"])
            return TwoFactorOutcome(recovered: true)
        case TwoFactorProvider.authenticator where state.authenticatorEnabled:
            try await lockoutCheck(user)
            guard let key = state.authenticatorKey, let secret = AuthenticatorKey.decode(key),
                  let step = AuthenticatorKey.matchingStep(code: token, secret: secret, nowSeconds: services.now() / 1_000_000,
                                                           after: state.lastUsedStep),
                  try await services.repository.useAuthenticatorStep(userID: user.id, step: step) else {
                try await wrongCode(user)
                throw Self.invalidTwoFactorToken
            }
            try await services.twoFactorLimiter.recordSuccess(account: user.id, address: "")
            return TwoFactorOutcome(remember: rememberAsked)
        default:
            // A provider the account does not have: the same answer as no code at all.
            throw required
        }
    }

    private func lockoutCheck(_ user: UserRecord) async throws {
        if let wait = try await services.twoFactorLimiter.attempt(account: user.id, address: "") {
            services.loginRefused("limited")
            throw TwoFactorController.tooMany(wait)
        }
    }

    private func wrongCode(_ user: UserRecord) async throws {
        try await services.twoFactorLimiter.recordFailure(account: user.id, address: "")
        services.loginRefused("wrong_two_step_code")
        services.logger.info("two-step login failed", metadata: ["user": "\(user.id)"])
    }

    /// A new remember token for the device (replacing its earlier one), bound to the account's security
    /// stamp: stored as a hash, with its expiry.
    func rememberDevice(user: UserRecord, device: String) async throws -> String {
        let token = AccessTokenSigner.base64URL(Data(SystemRandomSource().bytes(count: 32)))
        try await services.repository.rememberDevice(
            userID: user.id, identifier: device, tokenHash: RefreshTokens.hash(token), expires: services.now() + Self.rememberLifetime,
            stamp: user.securityStamp)
        return token
    }
}
