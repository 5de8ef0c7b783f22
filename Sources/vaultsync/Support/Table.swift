import Foundation

/// Columns aligned for a person at a terminal: each as wide as its widest cell, two spaces between,
/// nothing trailing. Piped output keeps its tab-separated lines instead (scripts split on tabs).
enum Table {
    /// `rows` as aligned lines (the first row may be a header).
    static func lines(_ rows: [[String]]) -> [String] {
        let count = rows.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: count)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        return rows.map { row in
            var line = ""
            for (index, cell) in row.enumerated() {
                let last = index == row.count - 1
                let padded = last ? cell : cell.padding(toLength: widths[index] + 2, withPad: " ", startingAt: 0)
                line += padded
            }
            return String(line.reversed().drop(while: { $0 == " " }).reversed())
        }
    }

    /// A header row (bold on a colour terminal) and the rows, aligned.
    static func render(header: [String], rows: [[String]]) -> [String] {
        let all = lines([header] + rows)
        guard let first = all.first else { return [] }
        return [Console.styled(first, .bold)] + all.dropFirst()
    }
}
