/// Bitwarden's push types: the `Type` of a message from the notifications hub (docs/PROTOCOL.md,
/// "The notifications hub"). The numbers are the protocol's, shared by the server that sends them and
/// the client that reads them; a client ignores a number not listed here.
public enum PushType: Int, Sendable, CaseIterable {
    case syncCipherUpdate = 0
    case syncCipherCreate = 1
    case syncLoginDelete = 2
    case syncFolderDelete = 3
    case syncCiphers = 4
    case syncVault = 5
    case syncOrgKeys = 6
    case syncFolderCreate = 7
    case syncFolderUpdate = 8
    case syncCipherDelete = 9
    case syncSettings = 10
    case logOut = 11
    case syncSendCreate = 12
    case syncSendUpdate = 13
    case syncSendDelete = 14
    case authRequest = 15
    case authRequestResponse = 16
}
