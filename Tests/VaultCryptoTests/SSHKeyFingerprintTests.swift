import Testing
import VaultCrypto

/// SSH fingerprints against `ssh-keygen -lf` (OpenSSH 9.2, 2026-12-02) on the same keys.
@Suite("SSH key fingerprints")
struct SSHKeyFingerprintTests {
    @Test("an Ed25519 public key: the fingerprint ssh-keygen -l prints")
    func ed25519() {
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOPPSog0q9UKO+lS1Y8rZytmQfm59dD1ap9E658WEr97 kat@example"
        #expect(SSHKeyFingerprint.sha256(publicKey: key) == "SHA256:QoTFcUugoBBim+3OYPjsBRSvfua+hSC86FvN69mTUAY")
        #expect(SSHKeyFingerprint.sha256(publicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOPPSog0q9UKO+lS1Y8rZytmQfm59dD1ap9E658WEr97")
                == "SHA256:QoTFcUugoBBim+3OYPjsBRSvfua+hSC86FvN69mTUAY", "the comment is not part of it")
    }

    @Test("an RSA public key without a comment")
    func rsa() {
        let key = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC9KKiRQgravtRJHUwaDD/mRk3pRnhQhtrtkhvm7hpWwRXF9hTXmQKwAQZiWEgRN+zG4c9TH9NeDaBENDPyoYYMpNt6fa65nHXqmlkZIShxfTAYzkNi+MIOnTQi29DAOaOLbwRAnljA8vjo6LiXVGjJaWdrAzLfIpfucykdTcvdAPB5lwgGcQnBkTD966R3iR/0JPXDGT7Hoe9VwNkM1NeoyPDXL8gx0L5ilp1Ihf+hycUYb5BHpyHubXsgj61P53Lm08PaIp1Rjs0BnSvqpWL5alPjRln+EHVKbyxQ5gr1MeudYwa73u1wKclD+DJ7W2w59AhaWlP3TDlNSznDCVFZ"
        #expect(SSHKeyFingerprint.sha256(publicKey: key) == "SHA256:kUVhamDRp5xXowq6e1FlOQsB5baUK3ZrZqIkhpl9BMQ")
    }

    @Test("what is not a public key line has no fingerprint")
    func notAKey() {
        #expect(SSHKeyFingerprint.sha256(publicKey: "") == nil)
        #expect(SSHKeyFingerprint.sha256(publicKey: "-----BEGIN OPENSSH PRIVATE KEY-----") == nil)
        #expect(SSHKeyFingerprint.sha256(publicKey: "ssh-ed25519 not*base64") == nil)
    }
}
