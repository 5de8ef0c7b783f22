import Foundation

/// RFC 4180 CSV, as password managers write it: fields separated by commas, quoted with `"` when they
/// hold a comma, quote, CR or LF, quotes doubled inside; rows end with LF or CRLF. A UTF-8 byte-order
/// mark at the start is ignored. The reader keeps each row's first line number for messages.
public enum CSV {
    /// One row: its cells and the line (1-based) it starts on.
    public struct Row: Sendable, Equatable {
        public var cells: [String]
        public var line: Int
    }

    /// Parses `text` into rows. Blank lines (no characters at all) are dropped. A quote left open at the
    /// end of the file, or a character after a closing quote, is an error naming the line.
    public static func parse(_ text: String) throws -> [Row] {
        var scalars = Substring(text).unicodeScalars
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        var rows: [Row] = []
        var cells: [String] = []
        var cell = String.UnicodeScalarView()
        var line = 1
        var rowLine = 1
        var inQuotes = false
        var quotedCell = false
        var afterClosingQuote = false
        var rowHasContent = false
        var index = scalars.startIndex

        func endCell() {
            cells.append(String(cell))
            cell = String.UnicodeScalarView()
            quotedCell = false
            afterClosingQuote = false
        }
        func endRow() {
            endCell()
            if rowHasContent || cells.count > 1 || !(cells.first ?? "").isEmpty {
                rows.append(Row(cells: cells, line: rowLine))
            }
            cells = []
            rowHasContent = false
        }

        while index < scalars.endIndex {
            let scalar = scalars[index]
            index = scalars.index(after: index)
            if inQuotes {
                if scalar == "\"" {
                    if index < scalars.endIndex, scalars[index] == "\"" {
                        cell.append("\"")
                        index = scalars.index(after: index)
                    } else {
                        inQuotes = false
                        afterClosingQuote = true
                    }
                } else {
                    if scalar == "\n" { line += 1 }
                    cell.append(scalar)
                }
                continue
            }
            switch scalar {
            case ",":
                rowHasContent = true
                endCell()
            case "\r":
                // CRLF or a lone CR ends the row.
                if index < scalars.endIndex, scalars[index] == "\n" { index = scalars.index(after: index) }
                endRow()
                line += 1
                rowLine = line
            case "\n":
                endRow()
                line += 1
                rowLine = line
            case "\"" where cell.isEmpty && !quotedCell:
                inQuotes = true
                quotedCell = true
                rowHasContent = true
            default:
                if afterClosingQuote {
                    throw ExchangeError.malformed(entry: "line \(line)", reason: "text after a closing quote (a quote inside a field must be doubled: \"\")")
                }
                cell.append(scalar)
                rowHasContent = true
            }
        }
        if inQuotes {
            throw ExchangeError.malformed(entry: "line \(rowLine)", reason: "a quoted field is never closed (missing \")")
        }
        if rowHasContent || !cell.isEmpty || !cells.isEmpty { endRow() }
        return rows
    }

    /// A table with a header row: each row as a dictionary of column name (as written) to cell.
    public struct Table: Sendable {
        public var header: [String]
        public var rows: [Row]

        /// The cell under `column` in `row` (the first column of that name, compared without case and
        /// surrounding spaces), or nil.
        public func value(_ row: Row, anyCase column: String) -> String? {
            let wanted = column.lowercased()
            guard let position = header.firstIndex(where: { $0.trimmingSpaces.lowercased() == wanted }),
                  position < row.cells.count else { return nil }
            return row.cells[position]
        }

        /// The columns of `row` whose names are not in `known` (compared without case) and whose cells are
        /// not empty, in file order: what the importer must keep somewhere instead of dropping. A known column
        /// named twice is read once (``value(_:anyCase:)`` reads the first), so its later ones are here too (a
        /// second `url` or `password` column was dropped: RELIABILITY bug 71).
        public func otherCells(_ row: Row, known: Set<String>) -> [(column: String, value: String)] {
            var out: [(String, String)] = []
            var read: Set<String> = []
            for (position, column) in header.enumerated() where position < row.cells.count {
                let value = row.cells[position]
                let name = column.trimmingSpaces.lowercased()
                if known.contains(name), read.insert(name).inserted { continue }
                if value.isEmpty { continue }
                out.append((column, value))
            }
            // Cells beyond the header are kept too, named by position.
            if row.cells.count > header.count {
                for position in header.count..<row.cells.count where !row.cells[position].isEmpty {
                    out.append(("column \(position + 1)", row.cells[position]))
                }
            }
            return out
        }
    }

    /// Parses `text` as a table whose first row is the header. An empty file is an error; so is a header
    /// that lacks one of `required` (compared without case), or one `checkHeader` (given the header's cells
    /// and line) throws for, which it does first.
    public static func table(_ text: String, required: [String] = [], format: String,
                             checkHeader: ((_ header: [String], _ line: Int) throws -> Void)? = nil) throws -> Table {
        let rows = try parse(text)
        guard let header = rows.first else {
            throw ExchangeError.malformed(entry: "line 1", reason: "the file is empty (a \(format) file starts with a header row)")
        }
        try checkHeader?(header.cells, header.line)
        let names = Set(header.cells.map { $0.trimmingSpaces.lowercased() })
        let missing = required.filter { !names.contains($0.lowercased()) }
        if !missing.isEmpty {
            throw ExchangeError.malformed(
                entry: "line \(header.line)",
                reason: "not a \(format) header: column \(missing.map { "'\($0)'" }.joined(separator: ", ")) missing (found: \(header.cells.joined(separator: ",")))")
        }
        // A row with more or fewer values than the header is a damaged file (a line break or a comma in a value
        // that was not quoted): its values would land in the wrong fields, or one entry would become two.
        for row in rows.dropFirst() where row.cells.count != header.cells.count && row.cells.contains(where: { !$0.trimmingSpaces.isEmpty }) {
            throw ExchangeError.malformed(
                entry: "line \(row.line)",
                reason: "\(row.cells.count) value\(row.cells.count == 1 ? "" : "s") where the header has \(header.cells.count) "
                    + "(a line break or a comma inside a value that is not in quotes?): the file looks damaged")
        }
        return Table(header: header.cells, rows: Array(rows.dropFirst()))
    }

    /// One CSV line for `cells`, quoting a cell only when it must be (comma, quote, CR, LF, or leading
    /// or trailing space), or every cell with `quoteAll`.
    public static func line(_ cells: [String], quoteAll: Bool = false) -> String {
        cells.map { cell in
            // By scalar: "\r\n" is one Character, equal to neither "\r" nor "\n".
            let needs = quoteAll || cell.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                || cell.first == " " || cell.last == " "
            return needs ? "\"" + cell.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : cell
        }.joined(separator: ",")
    }
}

extension String {
    /// Without leading and trailing spaces, tabs and newlines.
    var trimmingSpaces: String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
