/// VaultSync's own version, which both executables print for `--version`. (The Bitwarden protocol version
/// the client sends and the server announces in `/api/config` is another number: docs/PROTOCOL.md.)
public enum ProductVersion {
    public static let current = "0.2.0"
}
