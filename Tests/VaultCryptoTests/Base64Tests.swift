import Foundation
import Testing
@testable import VaultCrypto

@Suite("Strict base64")
struct Base64Tests {
    @Test("agrees with Foundation on every length from 0 to 300 bytes")
    func agreesWithFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...300 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64.encode(bytes)
            #expect(encoded == Data(bytes).base64EncodedString())
            #expect(Base64.decode(encoded) == Data(bytes))
            var text = encoded
            #expect(text.withUTF8 { Base64.validatedLength($0) } == length)
        }
    }

    @Test("refuses what is not padded standard base64", arguments: [
        "A", "AB", "ABC", "AB=C", "A===", "====", "AB==AB==", "AB-_", "AB\n=", "QR==", "QUI=QUI=", "QUJ=",
    ])
    func refuses(text: String) {
        #expect(Base64.decode(text) == nil)
        var copy = text
        #expect(copy.withUTF8 { Base64.validatedLength($0) } == nil)
    }

    @Test("accepts canonical padding")
    func accepts() {
        #expect(Base64.decode("QQ==") == Data("A".utf8))
        #expect(Base64.decode("QUI=") == Data("AB".utf8))
        #expect(Base64.decode("QUJD") == Data("ABC".utf8))
        #expect(Base64.decode("") == Data())
    }
}
