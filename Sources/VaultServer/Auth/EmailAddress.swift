import Foundation

/// How the server compares and stores account emails (docs/SECURITY.md, "Attack review 2026-12-01").
///
/// Every lookup of an account by email (registration, prelogin, login, two-step recovery, the
/// known-device question) goes through ``normalise(_:)``, so two spellings of one address that display
/// alike reach one account: NFKC (fullwidth letters become ASCII, NFD becomes NFC), Unicode case folding
/// (not the locale's lower-casing, so Turkish İ folds like anywhere else), and all whitespace at either
/// end trimmed, newlines included. Registration refuses addresses that would still only look like
/// another: invisible characters (``invisibleCharacter(in:)``), and non-ASCII addresses whose
/// ``skeleton(_:)`` is an existing account's ASCII address.
enum EmailAddress {
    /// The form accounts are stored and looked up by.
    static func normalise(_ email: String) -> String {
        let trimmed = email.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.unicodeScalars.allSatisfy(\.isASCII) else { return trimmed.lowercased() }
        // Case folding after NFKC can leave a form that NFKC changes again (a folded letter with a
        // compatibility decomposition); a second NFKC makes the result stable.
        return trimmed.precomposedStringWithCompatibilityMapping
            .folding(options: [.caseInsensitive], locale: nil)
            .precomposedStringWithCompatibilityMapping
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The form accounts were stored in before ``normalise(_:)``: trimmed of spaces and lower-cased. An
    /// account stored that way whose address is not ASCII can differ from its normalised form; lookups try
    /// both, so it still signs in.
    static func legacyForm(_ email: String) -> String {
        email.trimmingCharacters(in: .whitespaces).lowercased()
    }

    /// The first character of `email` that displays as nothing or moves the text around it: format
    /// characters (zero-width space, joiners, bidi controls, BOM), other default-ignorable code points
    /// (Hangul fillers, variation selectors), controls, private-use and unassigned code points, and
    /// whitespace inside the address.
    static func invisibleCharacter(in email: String) -> Unicode.Scalar? {
        email.unicodeScalars.first { scalar in
            let properties = scalar.properties
            switch properties.generalCategory {
            case .format, .control, .privateUse, .surrogate, .unassigned, .lineSeparator, .paragraphSeparator, .spaceSeparator:
                return true
            default:
                return properties.isDefaultIgnorableCodePoint || properties.isWhitespace
            }
        }
    }

    /// What a normalised address looks like: accents and other marks removed, widths folded, and the
    /// Cyrillic and Greek letters that are drawn like Latin ones replaced by those. Not Unicode's whole
    /// confusables list: the letters an address is most often forged with.
    static func skeleton(_ normalised: String) -> String {
        let folded = normalised.folding(options: [.caseInsensitive, .diacriticInsensitive, .widthInsensitive], locale: nil)
        var result = String.UnicodeScalarView()
        for scalar in folded.unicodeScalars {
            // Marks left by the folding (a combining dot above, as Turkish İ folds to).
            if scalar.properties.generalCategory == .nonspacingMark || scalar.properties.generalCategory == .enclosingMark { continue }
            if let latin = lookAlikes[scalar] { result.append(latin) } else { result.append(scalar) }
        }
        return String(result)
    }

    /// Lower-case Cyrillic and Greek letters (after case folding) that are drawn like a Latin letter.
    private static let lookAlikes: [Unicode.Scalar: Unicode.Scalar] = [
        // Cyrillic
        "\u{0430}": "a", "\u{0435}": "e", "\u{043E}": "o", "\u{0440}": "p", "\u{0441}": "c", "\u{0443}": "y",
        "\u{0445}": "x", "\u{0456}": "i", "\u{0458}": "j", "\u{0455}": "s", "\u{0501}": "d", "\u{04BB}": "h",
        "\u{051B}": "q", "\u{051D}": "w", "\u{0475}": "v", "\u{043A}": "k", "\u{043C}": "m", "\u{0442}": "t",
        "\u{0432}": "b", "\u{043D}": "h", "\u{04CF}": "l",
        // Greek
        "\u{03BF}": "o", "\u{03B1}": "a", "\u{03BD}": "v", "\u{03C1}": "p", "\u{03B9}": "i", "\u{03BA}": "k",
        "\u{03C4}": "t", "\u{03C5}": "u", "\u{03C7}": "x", "\u{03B5}": "e", "\u{03B7}": "n", "\u{03C9}": "w",
        // Latin letters outside ASCII drawn like ASCII ones
        "\u{0131}": "i", "\u{0269}": "i", "\u{0261}": "g", "\u{01C0}": "l",
    ]
}
