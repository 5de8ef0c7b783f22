import Foundation
import Testing
@testable import VaultCrypto

/// The known-answer vectors of spec §1.12, one named test each.
@Suite("Known-answer vectors (spec §1.12)")
struct KnownAnswerTests {
    @Test("TV1: PBKDF2 master key")
    func tv1() throws {
        let key = try MasterKey.derive(password: "67t9b5g67$%Dh89n", salt: "test_key", kdf: .pbkdf2(iterations: 10_000))
        #expect(key.hex == "1f4f68e29647b15ac250acd1118184518aa745a7fe95021b27c5402a16c3564b")
        #expect(key.base64 == "H09o4pZHsVrCUKzREYGEUYqnRaf+lQIbJ8VAKhbDVks=")
    }

    @Test("TV2: Argon2id master key")
    func tv2() throws {
        let key = try MasterKey.derive(
            password: "67t9b5g67$%Dh89n", salt: "test_key", kdf: .argon2id(iterations: 4, memoryMiB: 32, parallelism: 2))
        #expect(key.hex == "cff0e1b1a213a34c626ab3afe00911f01493ed2ff6968db83ee183f23335e1f2")
    }

    @Test("TV3: stretched master key (HKDF-Expand only)")
    func tv3() throws {
        let master = try MasterKey(bytes: Data(hex: "1f4f68e29647b15ac250acd1118184518aa745a7fe95021b27c5402a16c3564b"))
        let stretched = master.stretched()
        #expect(stretched.rawBytes.prefix(32).hex == "6f1fb22dee9825728fd77c5387adc3178e8678f93d84a3b671c5bdccbc15ed60")
        #expect(stretched.rawBytes.suffix(32).hex == "dd7fceea651bca265634221c4e1cb910303d7fa6d1f7c257e81a3055c1f9b39b")
        #expect(stretched.base64 == "bx+yLe6YJXKP13xTh63DF46GePk9hKO2ccW9zLwV7WDdf87qZRvKJlY0IhxOHLkQMD1/ptH3wlfoGjBVwfmzmw==")
    }

    @Test("TV4: master password hashes (PBKDF2), salt normalised", arguments: [
        "test@bitwarden.com", "TEST@bitwarden.com", " test@bitwarden.com",
    ])
    func tv4(email: String) throws {
        let key = try MasterKey.derive(password: "asdfasdf", salt: email, kdf: .pbkdf2(iterations: 100_000))
        #expect(key.base64 == "j6LIxCM7M4VKobykynJczRKr3ji3SCcg3vTuoBgEkmg=")
        #expect(key.serverAuthorizationHash(password: "asdfasdf") == "wmyadRMyBZOH7P/a/ucTCbSghKgdzDpPqUnu/DAVtSw=")
        #expect(key.localAuthorizationHash(password: "asdfasdf") == "npf6w9mFGiNJZkg6QdWsiqZr94+ClKDTzF/B3XW4XV4=")
    }

    @Test("TV5: master password hash (Argon2id)")
    func tv5() throws {
        let key = try MasterKey.derive(
            password: "asdfasdf", salt: "test_salt", kdf: .argon2id(iterations: 4, memoryMiB: 32, parallelism: 2))
        #expect(key.base64 == "YnVyODD8R9VCIKZDb9B7KQSGIyyZNvK9oWuVLA3yr3w=")
        #expect(key.serverAuthorizationHash(password: "asdfasdf") == "PR6UjYmjmppTYcdyTiNbAhPJuQQOmynKbdEl1oyi/iQ=")
    }

    @Test("TV6: AES-256-CBC-HMAC-SHA256 encrypts and decrypts the SDK vector")
    func tv6() throws {
        let key = try SymmetricCryptoKey(bytes: (0..<64).map { UInt8($0) })
        let expected = "2.2NokAMS6llUxk26oueMqrA==|6k0QD71SJLy2WEBDkV4esiTrgkP/z7eoSedSesGLGYE=|PE4sb0jpAwZW+tnyPuW43eeWvSxjvdw3xMJlPGbDlYI="
        let encrypted = try EncString.encrypt(
            Array("Bitwarden SDK test vector".utf8), key: key, iv: Array(Data(hex: "d8da2400c4ba965531936ea8b9e32aac")))
        #expect(encrypted.serialized == expected)
        #expect(encrypted.ciphertext.hex == "ea4d100fbd5224bcb6584043915e1eb224eb8243ffcfb7a849e7527ac18b1981")
        #expect(encrypted.mac?.hex == "3c4e2c6f48e9030656fad9f23ee5b8dde796bd2c63bddc37c4c2653c66c39582")
        #expect(try EncString(expected).decryptString(key: key) == "Bitwarden SDK test vector")
        // A parsed value decodes its parts on demand; they match the assembled ones.
        let parsed = try EncString(expected)
        #expect(parsed.iv?.hex == "d8da2400c4ba965531936ea8b9e32aac")
        #expect(parsed.ciphertext == encrypted.ciphertext && parsed.mac == encrypted.mac && parsed == encrypted)
        #expect(try EncString(type: .aesCbc256HmacSha256B64, iv: parsed.iv, ciphertext: parsed.ciphertext, mac: parsed.mac) == parsed)
    }

    static let tv7UserKey = "w2LO+nwV4oxwswVYCxlOfRUseXfvU03VzvKQHrqeklPgiMZrspUe6sOBToCnDn9Ay0tuCBn8ykVVRb7PWhub2Q=="

    @Test("TV7: decrypts cipher fields with a known user key", arguments: [
        ("2.d3rzo0P8rxV9Hs1m1BmAjw==|JOwna6i0zs+K7ZghwrZRuw==|SJqKreLag1ID+g6H1OdmQr0T5zTrVWKzD6hGy3fDqB0=", "My test login"),
        ("2.EBNGgnaMHeO/kYnI3A0jiA==|9YXlrgABP71ebZ5umurCJQ==|GDk5jxiqTYaU7e2AStCFGX+a1kgCIk8j0NEli7Jn0L4=", "test_username"),
        ("2.M7ZJ7EuFDXCq66gDTIyRIg==|B1V+jroo6+m/dpHx6g8DxA==|PIXPBCwyJ1ady36a7jbcLg346pm/7N/06W4UZxc1TUo=", "test_password"),
        ("2.hqdioUAc81FsKQmO1XuLQg==|oDRdsJrQjoFu9NrFVy8tcJBAFKBx95gHaXZnWdXbKpsxWnOr2sKipIG43pKKUFuq|3gKZMiboceIB5SLVOULKg2iuyu6xzos22dfJbvx0EHk=", "DKWOW4PCP3MYFWLN53BLYAMYQEQJU4MJ"),
    ])
    func tv7(encString: String, plaintext: String) throws {
        let key = try SymmetricCryptoKey(base64: Self.tv7UserKey)
        #expect(try EncString(encString).decryptString(key: key) == plaintext)
    }

    @Test("TV7: the value encrypted under another key fails its MAC")
    func tv7MustFail() throws {
        let key = try SymmetricCryptoKey(base64: Self.tv7UserKey)
        let foreign = try EncString("2.xzDCDWqRBpHm42EilUvyVw==|nIrWV3l/EeTbWTnAznrK0Q==|sUj8ol2OTgvvTvD86a9i9XUP58hmtCEBqhck7xT5YNk=")
        #expect(throws: CryptoError.macMismatch) { try foreign.decryptString(key: key) }
    }

    @Test("TV8: full account: password → user key → RSA private key → organization key")
    func tv8() throws {
        let master = try MasterKey.derive(password: "asdfasdfasdf", salt: "test@bitwarden.com", kdf: .pbkdf2(iterations: 600_000))
        #expect(master.hex == "c925ead5154b284695d5ea1013fba2f5a14a22f5d397d3c05f0a753258df179d")
        #expect(master.serverAuthorizationHash(password: "asdfasdfasdf") == "8HT+qrqqhBaGEIHp9mwuv1ivoW9r6yaauAkOCYbe+SM=")
        #expect(master.localAuthorizationHash(password: "asdfasdfasdf") == "aOvkBXFhSdgrBWR3hZCMRoML9+h5yRblU3lFphCdkeA=")
        #expect(master.stretched().base64 == "qt/RXR05/LhS7mQwmsIfwdcQKl+IGxkX9ZnrqgdmjCAZUkt3dja0l0WxaQh+YY5ANY7HcbCXOkQnD9A4XewRlw==")

        let userKey = try master.decryptUserKey(EncString(TestAccount.protectedUserKey))
        #expect(userKey.base64 == "bYCsk857hl8QJJtxyRK65tjUrbxKC4aDifJpsml+NIv4W9cVgFvi3qVD+yJTUU2T4UwNKWYtt9pqWf7Q+2WCCg==")

        let privateDER = try EncString(TestAccount.encryptedPrivateKey).decrypt(key: userKey)
        #expect(privateDER.count == 1219)
        #expect(Array(privateDER.prefix(4)) == [0x30, 0x82, 0x04, 0xbf])
        let privateKey = try RSAPrivateKey(pkcs8DER: privateDER)
        #expect(privateKey.publicKey.spkiBase64 == TestAccount.publicKey)

        let orgKey = try privateKey.unwrapKey(EncString(TestAccount.organizationKey))
        #expect(orgKey.base64 == "Suevr+OFaGpv34STcpCt0xG7djBQmLxfjW28+5oyHDYLLKNQmMFIoR41FCVFurEkW/EdrJmZ9gjJjz1uN6egRg==")
    }

    @Test("TV9: legacy type 0 protected user key decrypts with the raw master key")
    func tv9() throws {
        let master = try MasterKey.derive(password: "asdfasdfasdf", salt: "legacy@bitwarden.com", kdf: .pbkdf2(iterations: 600_000))
        let protected = try EncString("0.8UClLa8IPE1iZT7chy5wzQ==|6PVfHnVk5S3XqEtQemnM5yb4JodxmPkkWzmDRdfyHtjORmvxqlLX40tBJZ+CKxQWmS8tpEB5w39rbgHg/gqs0haGdZG4cPbywsgGzxZ7uNI=")
        #expect(protected.type == .aesCbc256B64)
        let userKey = try master.decryptUserKey(protected)
        #expect(userKey.rawBytes.prefix(32).hex == "0c5f97cb2504ec4389615a3a067ff21cd1a87d1d7618d52c75ca027384a57d94")
        #expect(userKey.rawBytes.suffix(32).hex == "bad7ea8918a9e31dda39b4ed495bbd33fd1a1134e204864bc2d0b28580e08ca7")
    }

    @Test("TV9: a type 0 string is never decrypted with a 64-byte key (downgrade protection)")
    func tv9Downgrade() throws {
        let protected = try EncString("0.8UClLa8IPE1iZT7chy5wzQ==|6PVfHnVk5S3XqEtQemnM5yb4JodxmPkkWzmDRdfyHtjORmvxqlLX40tBJZ+CKxQWmS8tpEB5w39rbgHg/gqs0haGdZG4cPbywsgGzxZ7uNI=")
        let key64 = SymmetricCryptoKey.generate()
        #expect(throws: CryptoError.wrongKeyType(encryptionType: 0, keyBytes: 64)) { try protected.decrypt(key: key64) }
    }

    static let tv10Key = "fSfkd76R0EZKfOLOPlTkjzll9Et5qRCs0DMMv5O/56n6SWhLgTwe7DOrufLppwxRXUnAY+1D7jsmVG8wO5JdhA=="
    static let tv10Type4Body = "DMD1D5r6BsDDd7C/FE1eZbMCKrmryvAsCKj6+bO54gJNUxisOI7SDcpPLRXf+JdhqY15pT+wimQ5cD9C+6OQ6s71LFQHewXPU29l9Pa1JxGeiKqp37KLYf+1IS6UB2K3ANN35C52ZUHh2TlzIS5RuntxnpCw7APbcfpcnmIdLPJBtuj/xbFd6eBwnI3GSe5qdS6/Ixdd0dgsZcpz3gHJBKmIlSo0YN60SweDq3kTJwox9xSqdCueIDg5U4khc7RhjYx8b33HXaNJj3DwgIH8iLj+lqpDekogr630OhHG3XRpvl4QzYO45bmHb8wAh67Dj70nsZcVg6bAEFHdSFohww=="

    @Test("TV10: RSA-OAEP EncStrings of types 3, 4 and 6 unwrap the same key", arguments: [
        "3.SUx5gWrgmAKs/S1BoQrqOmx2Hl5fPVBVHokW17Flvm4TpBnJJRkfoitp7Jc4dfazPYjWGlckJz6X+qe+/AWilS1mxtzS0PmDy7tS5xP0GRlB39dstCd5jDw1wPmTbXiLcQ5VTvzpRAfRMEYVveTsEvVTByvEYAGSn4TnCsUDykyhRbD0YcJ4r1KHLs1b3BCBy2M1Gl5nmwckH08CAXaf8VfuBFStAGRKueovqp4euneQla+4G4fXdVvb8qKPnu0iVuALIE6nUNmeOiA3xN3d+akMxbbGxrQ1Ca4TYWjHVdj9C6abngQHkjKNYQwGUXrYo160hP4LIHn/huK6bZe5dQ==",
        "4." + tv10Type4Body,
        "6." + tv10Type4Body + "|AA==",
    ])
    func tv10(encString: String) throws {
        let privateKey = try RSAPrivateKey(pem: TestAccount.tv10PrivateKeyPEM)
        let unwrapped = try privateKey.unwrapKey(EncString(encString))
        #expect(unwrapped.base64 == Self.tv10Key)
    }

    @Test("TV11: URI checksum")
    func tv11() {
        #expect(URIChecksum.plaintext(for: "https://example.com") == "EAaArVRs5qV39C9S3zO0z9ynVoWeZkuNfeMpsVDQnOk=")
    }

    @Test("TV12: EncString ⇄ binary form")
    func tv12() throws {
        let text = "2.pMS6/icTQABtulw52pq2lg==|XXbxKxDTh+mWiN1HjH2N1w==|Q6PkuT+KX/axrgN9ubD5Ajk2YNwxQkgs3WJM0S0wtG8="
        let expectedHex = "02" + "a4c4bafe271340006dba5c39da9ab696"
            + "43a3e4b93f8a5ff6b1ae037db9b0f902393660dc3142482cdd624cd12d30b46f" + "5d76f12b10d387e99688dd478c7d8dd7"
        let binary = try EncString(text).binary()
        #expect(binary.count == 65)
        #expect(binary.hex == expectedHex)
        #expect(try EncString(binary: Data(hex: expectedHex)).serialized == text)
    }

    @Test("TV12: negative parses are refused with a reason", arguments: [
        ("8.ABC", "header"),
        ("2.pMS6/icTQABtulw52pq2lg==|XXbxKxDTh+mWiN1HjH2N1w==", "body"),
    ])
    func tv12Negative(text: String, part: String) {
        #expect {
            try EncString(text)
        } throws: { error in
            guard case CryptoError.malformedEncString(let badPart, let reason) = error else { return false }
            return badPart == part && !reason.isEmpty
        }
    }

    @Test("TV12: the type 8 parse error says what the SDK says")
    func tv12Message() {
        #expect(throws: CryptoError.malformedEncString(part: "header", reason: "invalid encryption type, got type 8 with 1 parts")) {
            try EncString("8.ABC")
        }
    }
}

extension MasterKey {
    var hex: String { key.withUnsafeBytes { Data($0).hex } }
    var base64: String { key.withUnsafeBytes { Data($0).base64EncodedString() } }
}

/// The organization vectors of organizations.md §1.5.
@Suite("Organization vectors (organizations.md §1.5)")
struct OrganizationVectorTests {
    static let orgKey = "Suevr+OFaGpv34STcpCt0xG7djBQmLxfjW28+5oyHDYLLKNQmMFIoR41FCVFurEkW/EdrJmZ9gjJjz1uN6egRg=="
    static let cipherKey = "QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl9gYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+fw=="

    static func iv(from start: UInt8) -> [UInt8] { (start..<start + 16).map { $0 } }

    @Test("OV1: collection name under the organization key")
    func ov1() throws {
        let key = try SymmetricCryptoKey(base64: Self.orgKey)
        let expected = "2.AAECAwQFBgcICQoLDA0ODw==|+VcCOuIP1y5ZDtjoLc1r0NhPaE2g01dMMFRhB5frXZ0=|F2O7fNTtIHTV98p5ockRfH9cKII0IBo3oUQxT2uTquY="
        #expect(try EncString.encrypt(Array("Default collection".utf8), key: key, iv: Self.iv(from: 0)).serialized == expected)
        #expect(try EncString(expected).decryptString(key: key) == "Default collection")
    }

    @Test("OV2: a cipher key wrapped by the organization key")
    func ov2() throws {
        let key = try SymmetricCryptoKey(base64: Self.orgKey)
        let cipherKey = try SymmetricCryptoKey(base64: Self.cipherKey)
        #expect(cipherKey.rawBytes == Data((0x40...0x7f).map { UInt8($0) }))
        let expected = "2.EBESExQVFhcYGRobHB0eHw==|cg3g2kFB3hM66Viv1gRBAXF2nge2ruPmN2VSipkn1FDxscKIiGHp9zVK4uCDe3H5IPwCnQnrp0BuDpcMFYf91mYkZr38wTArP6QjbZDdZlw=|LoL/GJVfPojG4qqh+7iuiTjQ81IM6675MHURqZZiLfI="
        let wrapped = try cipherKey.withUnsafeBytes { try EncString.encrypt($0, key: key, iv: Self.iv(from: 0x10)) }
        #expect(wrapped.serialized == expected)
        #expect(try EncString(expected).decryptKey(key: key) == cipherKey)
    }

    @Test("OV3: a cipher name under that cipher key, which the organization key cannot read")
    func ov3() throws {
        let cipherKey = try SymmetricCryptoKey(base64: Self.cipherKey)
        let expected = "2.ICEiIyQlJicoKSorLC0uLw==|EN5NnLCgtJi2eoadCPPtpA==|ClMlOA1xZh6l6+cKrJdFKEqQ4rv2P7sH7CFwna4UksA="
        #expect(try EncString.encrypt(Array("Shared login".utf8), key: cipherKey, iv: Self.iv(from: 0x20)).serialized == expected)
        #expect(try EncString(expected).decryptString(key: cipherKey) == "Shared login")
        let orgKey = try SymmetricCryptoKey(base64: Self.orgKey)
        #expect(throws: CryptoError.macMismatch) { try EncString(expected).decryptString(key: orgKey) }
    }

    /// Every MAC starts from a copy of the key's keyed HMAC state (`macTemplate`): a MAC computed before must
    /// not feed the next one.
    @Test("one key, many MACs in turn: OV1 and OV2's vectors again and again, encrypting and decrypting")
    func macsInTurn() throws {
        let key = try SymmetricCryptoKey(base64: Self.orgKey)
        let cipherKey = try SymmetricCryptoKey(base64: Self.cipherKey)
        let name = "2.AAECAwQFBgcICQoLDA0ODw==|+VcCOuIP1y5ZDtjoLc1r0NhPaE2g01dMMFRhB5frXZ0=|F2O7fNTtIHTV98p5ockRfH9cKII0IBo3oUQxT2uTquY="
        let wrapped = "2.EBESExQVFhcYGRobHB0eHw==|cg3g2kFB3hM66Viv1gRBAXF2nge2ruPmN2VSipkn1FDxscKIiGHp9zVK4uCDe3H5IPwCnQnrp0BuDpcMFYf91mYkZr38wTArP6QjbZDdZlw=|LoL/GJVfPojG4qqh+7iuiTjQ81IM6675MHURqZZiLfI="
        for _ in 0..<3 {
            #expect(try EncString.encrypt(Array("Default collection".utf8), key: key, iv: Self.iv(from: 0)).serialized == name)
            #expect(try EncString(name).decryptString(key: key) == "Default collection")
            #expect(try cipherKey.withUnsafeBytes { try EncString.encrypt($0, key: key, iv: Self.iv(from: 0x10)) }.serialized == wrapped)
            #expect(try EncString(wrapped).decryptKey(key: key) == cipherKey)
        }
    }
}

@Suite("Purpose keys derived from the master key")
struct PurposeKeyTests {
    @Test("deterministic per purpose, unrelated across purposes and to the stretched key")
    func purposeKeys() throws {
        let master = try MasterKey.derive(password: "correct horse battery staple", salt: "user@example.com", kdf: .pbkdf2(iterations: 5_000))
        let again = try MasterKey.derive(password: "correct horse battery staple", salt: "user@example.com", kdf: .pbkdf2(iterations: 5_000))
        let other = try MasterKey.derive(password: "another password", salt: "user@example.com", kdf: .pbkdf2(iterations: 5_000))
        let remember = master.purposeKey("two-factor-remember")
        #expect(remember.base64 == again.purposeKey("two-factor-remember").base64)
        #expect(remember.base64 != master.purposeKey("something-else").base64)
        #expect(remember.base64 != master.stretched().base64)
        #expect(remember.base64 != other.purposeKey("two-factor-remember").base64)
        // Something sealed with it opens only with the same password.
        let sealed = try EncString.encrypt(Data("token".utf8), key: remember)
        #expect(try Array(sealed.decrypt(key: again.purposeKey("two-factor-remember"))) == Array("token".utf8))
        #expect(throws: CryptoError.self) { try sealed.decrypt(key: other.purposeKey("two-factor-remember")) }
    }

    /// The vector was computed independently (Python's hmac: HKDF-Expand is one HMAC-SHA256 block of
    /// info || 0x01 for 32 bytes) from TV1's master key.
    @Test("known answer: TV1's master key, purpose two-factor-remember")
    func vector() throws {
        let master = try MasterKey.derive(password: "67t9b5g67$%Dh89n", salt: "test_key", kdf: .pbkdf2(iterations: 10_000))
        #expect(master.purposeKey("two-factor-remember").base64 ==
                "21mjipsosvManeBox40uXkeOr2xkMrlPNirXayHmcO7wTJuvIjFWqsBpU3uPtHHFvtI3Sa5mYdr3RUP2Y1Kqeg==")
    }
}
