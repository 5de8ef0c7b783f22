import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// The account's two-step login as the server reports it.
public struct TwoStepStatus: Sendable, Equatable {
    /// The providers that are on.
    public var enabled: [TwoFactorProviderType]
}

extension VaultEngine {
    /// The master password's server hash, checked against this device's copy first (a wrong password
    /// is refused here, without a request).
    func verifiedPasswordHash(_ password: String) async throws -> String {
        let current = try requireSession()
        guard let account = try await read({ tx in try tx.accounts.find(userID: current.userID) }) else {
            throw VaultError.notLoggedIn
        }
        let kdf = try cryptoCall { try account.kdf }
        let master = try cryptoCall { try MasterKey.derive(password: password, salt: current.email, kdf: kdf) }
        guard ConstantTime.equals(Array(master.localAuthorizationHash(password: password).utf8), Array(account.localAuthorizationHash.utf8)) else {
            throw VaultError.wrongPassword
        }
        return master.serverAuthorizationHash(password: password)
    }

    /// Runs an account-security call: online only, errors as for login.
    func accountCall<T: Sendable>(_ call: @Sendable (BitwardenAPI, String) async throws -> T) async throws -> T {
        do {
            return try await authorized(call)
        } catch let error as ServerCallError {
            throw Self.onlineOnly(error)
        }
    }

    /// Which two-step providers are on for the account.
    public func twoStepStatus() async throws -> TwoStepStatus {
        let providers = try await accountCall { api, token in try await api.twoFactorProviders(token: token) }
        return TwoStepStatus(enabled: providers.filter(\.enabled).map(\.type).sorted())
    }

    /// The authenticator key to set up (a fresh one while the authenticator is off). Show it to the
    /// user (as text or an `otpauth://` URI), then call ``enableAuthenticator(setup:code:password:)``
    /// with a code their app computed from it.
    public func authenticatorSetup(password: String) async throws -> AuthenticatorSetup {
        let hash = try await verifiedPasswordHash(password)
        return try await accountCall { api, token in try await api.authenticator(passwordHash: hash, token: token) }
    }

    /// Turns the authenticator on. Returns the account's recovery code, which the user should keep
    /// somewhere safe: it is the way in when the authenticator is lost.
    public func enableAuthenticator(setup: AuthenticatorSetup, code: String, password: String) async throws -> String? {
        let hash = try await verifiedPasswordHash(password)
        let normalised = TwoFactorRules.normalisedCode(code, provider: .authenticator)
        _ = try await accountCall { api, token in
            try await api.enableAuthenticator(key: setup.key, code: normalised, userVerificationToken: setup.userVerificationToken,
                                              passwordHash: hash, token: token)
        }
        return try await accountCall { api, token in try await api.recoveryCode(passwordHash: hash, token: token) }
    }

    /// Turns the authenticator off.
    public func disableAuthenticator(password: String) async throws {
        let hash = try await verifiedPasswordHash(password)
        try await accountCall { api, token in try await api.disableTwoFactor(.authenticator, passwordHash: hash, token: token) }
    }

    /// The account's two-step recovery code.
    public func twoStepRecoveryCode(password: String) async throws -> String? {
        let hash = try await verifiedPasswordHash(password)
        return try await accountCall { api, token in try await api.recoveryCode(passwordHash: hash, token: token) }
    }

    /// The personal API key (client id `user.<user id>` and its secret); `rotate` makes a new secret and
    /// the old one stops working.
    public func personalAPIKey(password: String, rotate: Bool = false) async throws -> APIKeyCredentials {
        let hash = try await verifiedPasswordHash(password)
        let userID = try requireSession().userID
        let secret = try await accountCall { api, token in try await api.apiKey(rotate: rotate, passwordHash: hash, token: token) }
        return APIKeyCredentials(clientID: "user." + userID, clientSecret: secret)
    }
}

extension AuthenticatorSetup {
    /// The key as an `otpauth://` URI for authenticator apps (account label: the email).
    public func uri(email: String, issuer: String = "VaultSync") -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~@")
        // The label is "issuer:account"; the colon stays literal (the key-URI format allows either).
        let label = [issuer, email].map { $0.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0 }.joined(separator: ":")
        return "otpauth://totp/\(label)?secret=\(key)&issuer=\(issuer.addingPercentEncoding(withAllowedCharacters: allowed) ?? issuer)"
    }
}
