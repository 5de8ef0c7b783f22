extension JSONValue {
    /// Indented JSON for people: two spaces per level, as JavaScript's `JSON.stringify(value, null, "  ")`
    /// writes it (Bitwarden's exports are written that way); a newline at the end.
    public var prettyText: String {
        var out = ""
        writePretty(into: &out, indent: 0)
        return out + "\n"
    }

    public func writePretty(into out: inout String, indent: Int) {
        let pad = String(repeating: "  ", count: indent + 1)
        let closing = String(repeating: "  ", count: indent)
        switch self {
        case .array(let values) where !values.isEmpty:
            out += "[\n"
            for (index, value) in values.enumerated() {
                out += pad
                value.writePretty(into: &out, indent: indent + 1)
                out += index == values.count - 1 ? "\n" : ",\n"
            }
            out += closing + "]"
        case .object(let object) where !object.isEmpty:
            out += "{\n"
            for (index, entry) in object.entries.enumerated() {
                out += pad + JSONValue.string(entry.key).jsonText + ": "
                entry.value.writePretty(into: &out, indent: indent + 1)
                out += index == object.count - 1 ? "\n" : ",\n"
            }
            out += closing + "}"
        default:
            out += jsonText
        }
    }
}

