import Testing
@testable import VaultExchange

@Suite("CSV reader and writer")
struct CSVTests {
    @Test("quotes, doubled quotes, commas and newlines inside fields, CRLF, BOM, blank lines")
    func awkward() throws {
        let text = "\u{FEFF}a,b,c\r\n\"x, y\",\"say \"\"hi\"\"\",\"two\nlines\"\r\n\r\nplain,,ü€\n"
        let rows = try CSV.parse(text)
        #expect(rows.map(\.cells) == [["a", "b", "c"], ["x, y", "say \"hi\"", "two\nlines"], ["plain", "", "ü€"]])
        #expect(rows.map(\.line) == [1, 2, 5])
    }

    @Test("a row of empty cells is kept; a last row without a newline is read")
    func emptyCells() throws {
        #expect(try CSV.parse(",,\nlast").map(\.cells) == [["", "", ""], ["last"]])
        #expect(try CSV.parse("\"\"").map(\.cells) == [[""]])
    }

    @Test("an unclosed quote and text after a closing quote name their line")
    func malformed() {
        #expect(throws: ExchangeError.malformed(entry: "line 2", reason: "a quoted field is never closed (missing \")")) {
            try CSV.parse("a,b\n\"open,x\nmore\n")
        }
        #expect(throws: ExchangeError.self) { try CSV.parse("a\n\"q\"x,1\n") }
    }

    @Test("what the writer writes, the reader reads back")
    func roundTrip() throws {
        let cells = ["plain", "with, comma", "with \"quote\"", "multi\r\nline", " padded ", "", "ünï"]
        let rows = try CSV.parse(CSV.line(cells) + "\n" + CSV.line(cells, quoteAll: true) + "\n")
        #expect(rows.map(\.cells) == [cells, cells])
        #expect(CSV.line(["a", "b c"]) == "a,b c")
    }

    @Test("a table's header is checked and unknown columns are found")
    func table() throws {
        let table = try CSV.table("Name,URL,Extra\nx,https://x,keep me\n", required: ["name", "url"], format: "test")
        #expect(table.value(table.rows[0], anyCase: "url") == "https://x")
        #expect(table.otherCells(table.rows[0], known: ["name", "url"]).map(\.value) == ["keep me"])
        #expect(throws: ExchangeError.self) { try CSV.table("a,b\n", required: ["name"], format: "test") }
        #expect(throws: ExchangeError.self) { try CSV.table("", format: "test") }
    }

    /// A line break or a comma in a value that was not quoted shifts the values: refused, naming the line,
    /// instead of importing the values into the wrong fields or one entry as two.
    @Test("a row with more or fewer values than the header is refused, naming its line; a row of empty cells is not")
    func raggedRows() throws {
        let split = "name,url,username,password,note\nBank,https://bank.example,alice\nS3cret!,\nMail,https://mail.example,bob,pw,\n"
        #expect(throws: ExchangeError.malformed(entry: "line 2", reason: "3 values where the header has 5 (a line break or a comma inside a value that is not in quotes?): the file looks damaged")) {
            try CSV.table(split, required: ["url"], format: "test")
        }
        #expect(throws: ExchangeError.malformed(entry: "line 3", reason: "6 values where the header has 5 (a line break or a comma inside a value that is not in quotes?): the file looks damaged")) {
            try CSV.table("name,url,username,password,note\nA,https://a,u,p,\nB,https://b,u,p,a,b\n", required: ["url"], format: "test")
        }
        #expect(try CSV.table("name,url,username\n,,\n,\nA,https://a,u\n", required: ["url"], format: "test").rows.count == 3)
    }
}
