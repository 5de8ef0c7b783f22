import Foundation

/// Columns aligned for a person at a terminal: each as wide as its widest cell, two spaces between,
/// nothing trailing. Piped output keeps its tab-separated lines instead (scripts split on tabs).
enum Table {
    /// `rows` as aligned lines (the first row may be a header).
    static func lines(_ rows: [[String]]) -> [String] {
        let count = rows.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: count)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], visibleWidth(cell)) }
        }
        return rows.map { row in
            var line = ""
            for (index, cell) in row.enumerated() {
                let last = index == row.count - 1
                let padded = last ? cell : cell + String(repeating: " ", count: widths[index] + 2 - visibleWidth(cell))
                line += padded
            }
            return String(line.reversed().drop(while: { $0 == " " }).reversed())
        }
    }

    /// The characters a terminal shows of `cell`: colour sequences (ESC [ … m) take no room.
    static func visibleWidth(_ cell: String) -> Int {
        var width = 0
        var inEscape = false
        for character in cell {
            if inEscape {
                if character == "m" { inEscape = false }
            } else if character == "\u{1B}" {
                inEscape = true
            } else {
                width += 1
            }
        }
        return width
    }

    /// Prints `rows`: aligned under `header` at a terminal, tab-separated without the header when piped.
    static func print(header: [String], rows: [[String]]) {
        guard Console.stdoutIsTTY else {
            for row in rows { Swift.print(row.joined(separator: "\t")) }
            return
        }
        for line in render(header: header, rows: rows) { Swift.print(line) }
    }

    /// A header row (bold on a colour terminal) and the rows, aligned.
    static func render(header: [String], rows: [[String]]) -> [String] {
        let all = lines([header] + rows)
        guard let first = all.first else { return [] }
        return [Console.styled(first, .bold)] + all.dropFirst()
    }
}
