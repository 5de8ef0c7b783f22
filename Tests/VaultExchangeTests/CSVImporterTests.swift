import Foundation
import Testing
import VaultModels
@testable import VaultExchange

/// The bytes and text of `Fixtures/<name>.csv` (decoded without dropping a byte-order mark).
private func fixture(_ name: String) throws -> (data: Data, text: String) {
    let url = try #require(Bundle.module.url(forResource: name, withExtension: "csv", subdirectory: "Fixtures"))
    let data = try Data(contentsOf: url)
    return (data, String(decoding: data, as: UTF8.self))
}

private func login(_ name: String, uris: [String] = [], username: String? = nil, password: String? = nil, totp: String? = nil) -> CipherView {
    CipherView(type: .login, name: name).with {
        $0.login = LoginView(uris: uris.map { LoginURIView(uri: $0) }, username: username, password: password, totp: totp)
    }
}

private func note(_ name: String) -> CipherView { CipherView(type: .secureNote, name: name) }
private func plain(_ name: String, _ value: String) -> FieldView { FieldView(type: .text, name: name, value: value) }
private func hidden(_ name: String, _ value: String) -> FieldView { FieldView(type: .hidden, name: name, value: value) }
private func date(_ iso: String) -> WireDate? { WireDate(iso8601: iso) }

/// The entry an import names in its `malformed` error, or nil when it does not throw that.
private func malformedEntry(_ text: String, _ format: ImportFormat) -> String? {
    do {
        _ = try CSVImporter.read(text, format: format)
        return nil
    } catch ExchangeError.malformed(let entry, _) {
        return entry
    } catch {
        return nil
    }
}

/// A 251-character value (over the 200 that a custom field holds).
private let long = "R" + String(repeating: "0123456789", count: 25)

@Suite("CSV importers")
struct CSVImporterTests {
    @Test("Bitwarden CSV: folders, favorites, notes, fields lines, URI lists, reprompt, a note's login cells, nameless rows")
    func bitwarden() throws {
        let (data, text) = try fixture("bitwarden")
        #expect(String(decoding: data, as: UTF8.self).contains("\r\n"))
        let vault = try CSVImporter.read(text, format: .bitwardenCSV)
        #expect(vault.items.map(\.entry) == ["line 2", "line 6", "line 8", "line 9"])
        #expect(vault.items.map(\.folderName) == ["Work/Servers", "Personal/Zürich", nil, "Work"])
        #expect(vault.folderNames == ["Work/Servers", "Personal/Zürich", "Work"])
        #expect(vault.skipped.isEmpty)
        guard vault.items.count == 4 else { return }
        #expect(vault.items[0].view == login(
            "Router, main", uris: ["https://192.168.1.1", "http://router.local.lan"], username: "admin",
            password: "p@ss \"quoted\", x", totp: "otpauth://totp/R?secret=JBSWY3DPEHPK3PXP"
        ).with {
            $0.notes = "Line one\nline two\n\nfields: no separator line"
            $0.favorite = true
            $0.reprompt = .password
            $0.fields = [plain("PIN", "1234"), plain("label: a", "b"), plain("extra_column", "rack 4")]
        })
        #expect(vault.items[1].view == note("Zürich notes 🏔").with {
            $0.notes = "密码 is password"
            $0.fields = [plain("login_username", "leftover")]
        })
        #expect(vault.items[2].view == login("example.com", uris: ["https://www.example.com/login"], username: "bob", password: "hunter2"))
        #expect(vault.items[3].view == login("Long").with { $0.notes = "extra_column: " + long })
    }

    @Test("Bitwarden CSV: the organization header (collections) and the short column names")
    func bitwardenVariants() throws {
        let organization = try CSVImporter.read(
            "collections,type,name,notes,fields,reprompt,login_uri,login_username,login_password,login_totp\r\nTeam A,login,Shared,,,,uri.example.com,u,p,\r\n",
            format: .bitwardenCSV)
        #expect(organization.items.map(\.view) == [login("Shared", uris: ["http://uri.example.com"], username: "u", password: "p").with {
            $0.fields = [plain("Collections", "Team A")]
        }])
        #expect(organization.folderNames.isEmpty)
        let short = try CSVImporter.read("type,name,uri,username,password,totp\nlogin,X,https://x.io,xu,xp,123456\n", format: .bitwardenCSV)
        #expect(short.items.map(\.view) == [login("X", uris: ["https://x.io"], username: "xu", password: "xp", totp: "123456")])
    }

    @Test("KeePassXC CSV: groups as folders without the root, TOTP, dates, a chosen icon, nameless and empty rows")
    func keepassxc() throws {
        let vault = try CSVImporter.read(try fixture("keepassxc").text, format: .keepassxcCSV)
        #expect(vault.items.map(\.entry) == ["line 2", "line 3", "line 5", "line 7"])
        #expect(vault.items.map(\.folderName) == [nil, "Work/Servers", "Personal", "Personal"])
        #expect(vault.folderNames == ["Work/Servers", "Personal"])
        #expect(vault.skipped.isEmpty)
        guard vault.items.count == 4 else { return }
        #expect(vault.items[0].view == login("Email", uris: ["https://mail.example.com"], username: "alice@example.com", password: "s3cr3t,with comma").with {
            $0.revisionDate = date("2024-01-30T14:09:33Z")
            $0.creationDate = date("2023-12-01T08:00:00Z")
        })
        #expect(vault.items[0].view.revisionDate?.iso8601 == "2024-01-30T14:09:33.000000Z")
        #expect(vault.items[1].view == login(
            "SSH \"bastion\"", uris: ["ssh://bastion.example.org:22"], username: "root", password: "pä$$wörd",
            totp: "otpauth://totp/bastion?secret=JBSWY3DPEHPK3PXP&period=30"
        ).with {
            $0.notes = "first line\nsecond line"
            $0.fields = [plain("KeePassXC icon", "12"), plain("Last Modified", "yesterday")]
            $0.creationDate = date("2023-12-01T08:00:00Z")
        })
        #expect(vault.items[2].view == login("zürich.ch", uris: ["https://www.zürich.ch/login"], username: "carol", password: "pw"))
        #expect(vault.items[3].view == login("密码").with { $0.revisionDate = date("2024-02-29T23:59:59Z") })
    }

    @Test("KeePassX's older six-column header is read; an extra column becomes a field")
    func keepassxOlder() throws {
        let vault = try CSVImporter.read("Group,Title,Username,Password,URL,Notes,Comment\nRoot/A,T,u,p,,,hello\nRoot,,,,,,\n", format: .keepassxcCSV)
        #expect(vault.items.map(\.view) == [
            login("T", username: "u", password: "p").with { $0.fields = [plain("Comment", "hello")] },
            // A group but nothing else: not entirely empty, so it is kept (named "Untitled"), never dropped.
            login("Untitled"),
        ])
        #expect(vault.items.map(\.folderName) == ["A", nil])
    }

    @Test("KeePassXC groups written with backslashes are the same folders as with slashes, without the root")
    func keepassxcBackslashGroups() throws {
        let text = "\"Group\",\"Title\",\"Username\",\"Password\",\"URL\",\"Notes\"\n\"Root\\Personal\\Mail\",\"m1\",\"u\",\"p\",\"\",\"\"\n\"Root/Personal/Mail\",\"m2\",\"u\",\"p\",\"\",\"\"\n"
        let vault = try CSVImporter.read(text, format: .keepassxcCSV)
        #expect(vault.items.map(\.folderName) == ["Personal/Mail", "Personal/Mail"])
    }

    @Test("Chrome CSV: BOM and CRLF, Android apps, a URI without scheme, an extra column, nameless rows")
    func chrome() throws {
        let (data, text) = try fixture("chrome")
        #expect(Array(data.prefix(3)) == [0xEF, 0xBB, 0xBF])
        #expect(text.contains("\r\n"))
        let vault = try CSVImporter.read(text, format: .chromeCSV)
        #expect(vault.items.map(\.entry) == ["line 2", "line 3", "line 5", "line 7"])
        #expect(vault.items.allSatisfy { $0.folderName == nil })
        #expect(vault.folderNames.isEmpty && vault.skipped.isEmpty)
        #expect(vault.items.map(\.view) == [
            login("example.com", uris: ["https://example.com/"], username: "user@example.com", password: "pa,ss\"word"),
            login("com.example.app", uris: ["androidapp://com.example.app"], username: "droid", password: "pw1").with {
                $0.notes = "app note\ntwo lines"
            },
            login("Zürich Bank", uris: ["http://bank.zürich.ch"], password: "密码🔑").with { $0.fields = [plain("extra", "branch 7")] },
            login("nameless.org", uris: ["https://www.nameless.org/path"], password: "pw3"),
        ])
    }

    @Test("Chrome's older header (no note); a multi-line extra column goes to the notes; a row with nothing but a password is Untitled")
    func chromeOlder() throws {
        let vault = try CSVImporter.read(
            "name,url,username,password,api key\nN,https://n.io,u,p,\"a\nb\"\n,,,lonely,\n,,,,\n", format: .chromeCSV)
        #expect(vault.items.map(\.view) == [
            login("N", uris: ["https://n.io"], username: "u", password: "p").with { $0.notes = "api key: a\nb" },
            login("Untitled", password: "lonely"),
        ])
        #expect(vault.items.map(\.entry) == ["line 2", "line 4"])
        let short = try CSVImporter.read("name,url,username,password,pin code\n,https://a.b,,,0000\n", format: .chromeCSV)
        #expect(short.items.map(\.view) == [login("a.b", uris: ["https://a.b"]).with { $0.fields = [hidden("pin code", "0000")] }])
        // Secrets as other managers name their columns are hidden; a plain column stays text.
        let named = try CSVImporter.read("name,url,username,password,login_totp,CARD NUMBER,VERIFICATION NUMBER,Phone\nS,,,,JBSW,4111,123,555\n",
                                         format: .chromeCSV)
        #expect(named.items.first?.view.fields == [hidden("login_totp", "JBSW"), hidden("CARD NUMBER", "4111"),
                                                   hidden("VERIFICATION NUMBER", "123"), plain("Phone", "555")])
        // A column the format reads, named twice: the first is read, the second kept as a field (it was dropped:
        // RELIABILITY bug 71).
        let twice = try CSVImporter.read("name,url,username,password,extra,Extra,URL,password\nD,https://one.example,u,p1,x1,x2,https://two.example,p2\n",
                                         format: .chromeCSV)
        #expect(twice.items.map(\.view) == [login("D", uris: ["https://one.example"], username: "u", password: "p1").with {
            $0.fields = [plain("extra", "x1"), plain("Extra", "x2"), plain("URL", "https://two.example"), hidden("password", "p2")]
        }])
        let spaces = try CSVImporter.read("name,url,username,password\nSpaces,,,\"  \"\n", format: .chromeCSV)
        #expect(spaces.items.map(\.view) == [login("Spaces", password: "  ")])
    }

    @Test("Firefox CSV: names from hosts, realm/action/guid/last-used as fields, dates, Sync's entry skipped")
    func firefox() throws {
        let vault = try CSVImporter.read(try fixture("firefox").text, format: .firefoxCSV)
        #expect(vault.skipped == [SkippedEntry(entry: "line 3", reason: "Firefox Sync's internal entry")])
        #expect(vault.items.map(\.entry) == ["line 2", "line 4", "line 6"])
        #expect(vault.folderNames.isEmpty)
        guard vault.items.count == 3 else { return }
        #expect(vault.items[0].view == login("mozilla.org", uris: ["https://www.mozilla.org"], username: "fox@example.com", password: "f1r3,\"fox\"").with {
            $0.fields = [
                plain("formActionOrigin", "https://accounts.mozilla.org"),
                plain("Firefox guid", "{a1b2c3d4-0000-4000-8000-000000000001}"),
                plain("Last used", "2024-01-31T14:09:33.000000Z"),
            ]
            $0.creationDate = date("2024-01-30T14:09:33Z")
            $0.login?.passwordRevisionDate = date("2024-01-30T14:09:33.5Z")
        })
        #expect(vault.items[1].view == login("intranet.example.com", uris: ["https://intranet.example.com:8443"], username: "admin", password: "密码").with {
            $0.fields = [plain("httpRealm", "Intranet Zürich"), plain("Firefox guid", "{guid-3}"), plain("timeCreated", "not-a-time")]
        })
        #expect(vault.items[2].view == login("example.net", uris: ["https://example.net"], password: "p w").with {
            $0.fields = [plain("Firefox guid", "{guid-4}"), plain("extraCol", "kept 😀")]
            $0.creationDate = WireDate(millisecondsSinceEpoch: 1_706_623_773_000)
        })
    }

    @Test("1Password 8 CSV: TOTP, favorite, archived, tags as folder and field, a PIN column hidden, a long value in the notes")
    func onePassword8() throws {
        let vault = try CSVImporter.read(try fixture("1password").text, format: .onePasswordCSV)
        #expect(vault.items.map(\.entry) == ["line 2", "line 4", "line 6", "line 7"])
        #expect(vault.items.map(\.folderName) == ["Dev", "Finance", nil, nil])
        #expect(vault.folderNames == ["Dev", "Finance"])
        #expect(vault.skipped.isEmpty)
        #expect(vault.items.map(\.view) == [
            login("GitHub", uris: ["https://github.com/login"], username: "octo", password: "gh,p\"w",
                  totp: "otpauth://totp/GitHub:octo?secret=JBSWY3DPEHPK3PXP&issuer=GitHub").with {
                $0.favorite = true
                $0.notes = "multi\nline note"
                $0.fields = [plain("Tags", "Dev, Work/Code")]
            },
            login("Old bank", uris: ["http://bank.example.com"], password: "old-pass").with {
                $0.fields = [plain("Archived in 1Password", "true"), hidden("Vault PIN", "4321")]
            },
            login("zürich.ch", uris: ["https://www.zürich.ch"], username: "züri", password: "pw").with {
                $0.fields = [plain("Custom", "value with \"quotes\"")]
            },
            login("Recovery codes").with { $0.notes = "Custom: " + long },
        ])
    }

    @Test("1Password 7 CSV: upper-case names, a URL list, TYPE (secure notes keep their login cells as fields)")
    func onePassword7() throws {
        let vault = try CSVImporter.read(try fixture("1password7").text, format: .onePasswordCSV)
        #expect(vault.items.map(\.entry) == ["line 2", "line 4", "line 5", "line 6"])
        #expect(vault.items.map(\.folderName) == [nil, "Home", nil, nil])
        #expect(vault.folderNames == ["Home"])
        #expect(vault.items.map(\.view) == [
            login("Forum", uris: ["https://forum.example.com", "https://m.forum.example.com"], username: "me", password: "pw7"),
            note("Wifi").with { $0.notes = "WPA2 key is on the router" },
            login("Visa").with { $0.fields = [plain("Type", "Credit Card"), plain("cardholder", "Jane Doe"), hidden("cvv", "123")] },
            note("Server").with { $0.fields = [plain("URLS", "ssh.example.com"), plain("USERNAME", "root"), hidden("PASSWORD", "toor")] },
        ])
        #expect(vault.items.filter { $0.view.type == .login }.count == 2 && vault.items.filter { $0.view.type == .secureNote }.count == 2)
    }

    @Test("another format's header, or an unclosed quote, is an error naming the line")
    func malformed() {
        #expect(malformedEntry("name,url,username,password\n", .bitwardenCSV) == "line 1")
        #expect(malformedEntry("name,url,username,password\n", .keepassxcCSV) == "line 1")
        #expect(malformedEntry("Group,Title\n", .chromeCSV) == "line 1")
        #expect(malformedEntry("name,url,username\n", .firefoxCSV) == "line 1")
        #expect(malformedEntry("url,username,password\n", .onePasswordCSV) == "line 1")
        #expect(malformedEntry("", .chromeCSV) == "line 1")
        #expect(malformedEntry("type,name,notes\r\nlogin,ok,\r\nnote,broken,\"never closed\r\nmore\r\n", .bitwardenCSV) == "line 3")
        #expect(malformedEntry("\"Group\",\"Title\"\n\"Root\",\"a\"x\n", .keepassxcCSV) == "line 2")
        #expect(throws: ExchangeError.self) { try CSVImporter.read("{}", format: .bitwardenJSON) }
        #expect(throws: ExchangeError.malformed(
            entry: "line 1", reason: "not a firefox-csv header: column 'password' missing (found: url,username)")) {
            try CSVImporter.read("url,username\nhttps://a.b,u\n", format: .firefoxCSV)
        }
    }

    /// RELIABILITY bug 76 (left open by bug 73): the required columns alone let a file of one format import under
    /// another's mapping (a KeePassXC or Firefox file has every column `chrome-csv` requires).
    @Test("each fixture named as another CSV format is refused, naming its own; named as its own it reads")
    func anotherFormatsFile() throws {
        let fixtures: [(String, ImportFormat)] = [("bitwarden", .bitwardenCSV), ("keepassxc", .keepassxcCSV), ("chrome", .chromeCSV),
                                                  ("firefox", .firefoxCSV), ("1password", .onePasswordCSV), ("1password7", .onePasswordCSV)]
        let csvFormats = ImportFormat.allCases.filter { $0 != .bitwardenJSON }
        for (name, own) in fixtures {
            let text = try fixture(name).text
            #expect(try !CSVImporter.read(text, format: own).items.isEmpty)
            for other in csvFormats where other != own {
                do {
                    _ = try CSVImporter.read(text, format: other)
                    Issue.record("\(name).csv read as \(other.rawValue)")
                } catch ExchangeError.malformed(let entry, let reason) {
                    #expect(entry == "line 1" && reason.contains("a \(own.rawValue) file") && reason.contains("--format \(own.rawValue)"),
                            "\(name).csv as \(other.rawValue): \(reason)")
                }
            }
        }
        // A header no one format plainly writes is read under the format named, as before.
        #expect(try CSVImporter.read("Title,URL,Username,Password\nT,https://t.io,u,p\n", format: .onePasswordCSV).items.count == 1)
        #expect(try CSVImporter.read("url,username,password\nhttps://t.io,u,p\n", format: .firefoxCSV).items.count == 1)
    }

    @Test("URIs get http:// only without a scheme and with a dot; hosts drop userinfo, port and www.; folder names are tidied")
    func helpers() {
        #expect(CSVImporter.fixURI("  example.com/a ") == "http://example.com/a")
        #expect(CSVImporter.fixURI("localhost") == "localhost")
        #expect(CSVImporter.fixURI("ftp://files.example.com") == "ftp://files.example.com")
        #expect(CSVImporter.fixURI("  ") == nil)
        #expect(CSVImporter.host(of: "https://user:pw@WWW.Example.com:8443/path?q") == "example.com")
        #expect(CSVImporter.host(of: "example.com") == nil)
        #expect(CSVImporter.folderName("\\A\\B\\") == "A/B")
        #expect(CSVImporter.folderName(" / ") == nil)
    }
}
