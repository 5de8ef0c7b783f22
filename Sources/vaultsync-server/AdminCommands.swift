import ArgumentParser
import Foundation
import Logging
import VaultServer

/// `vaultsync-server admin …`: accounts, invitations and sessions, on the database the server's own flags
/// name, while the server serves (docs/OPERATIONS.md, "Administration").
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Manage accounts, invitations and sessions (reads the server's flags and environment).",
        discussion: """
        Give the same --data-dir, --database-url-file or VAULTSYNC_DATABASE_URL as the server. The commands work \
        while the server runs. Nothing here reads a vault: items stay encrypted and are only counted.

        Examples:
          vaultsync-server --data-dir /var/lib/vaultsync admin users list
          vaultsync-server admin users disable alice@example.com
          vaultsync-server --signups-allowed false      # then only invited addresses may register:
          vaultsync-server admin invite bob@example.com
          vaultsync-server admin sessions revoke alice@example.com
        """,
        subcommands: [UsersCommand.self, InviteCommand.self, SessionsCommand.self])
}

/// Opens the server's database as the server would, for one administration command.
enum AdminDatabase {
    static func open(_ server: ServerCommand) async throws -> (Administration, any SQLDatabase) {
        let secrets = try server.secrets()
        var configuration = ServerConfiguration()
        configuration.dataDirectory = server.dataDir
        configuration.databaseURL = secrets.databaseURL
        // A data folder with no database is a wrong --data-dir, not a new server: say so, create nothing.
        if configuration.databaseURL == nil, !FileManager.default.fileExists(atPath: configuration.sqlitePath) {
            throw AdminFailure.usage("""
                there is no server database at \(configuration.sqlitePath). Give the --data-dir (or VAULTSYNC_DATA_DIR) \
                the server uses, or its --database-url-file (or VAULTSYNC_DATABASE_URL).
                """)
        }
        var logger = Logger(label: "vaultsync-server.admin")
        logger.logLevel = .warning
        let database = try openDatabase(configuration, logger: logger)
        if let postgres = database as? PostgresDatabase { try await postgres.checkConnection() }
        let administration = Administration(database: database, logger: logger)
        try await administration.prepare()
        return (administration, database)
    }

    /// Runs `body` on the opened database, writes a refusal in English and closes the database.
    static func run(_ server: ServerCommand, _ body: (Administration) async throws -> Void) async throws {
        let administration: Administration, database: any SQLDatabase
        do {
            (administration, database) = try await open(server)
        } catch {
            throw AdminFailure.report(error)
        }
        do {
            try await body(administration)
        } catch {
            await database.close()
            throw AdminFailure.report(error)
        }
        await database.close()
    }
}

/// A refusal of what was given (exit 64), said in English.
struct AdminFailure: Error {
    let message: String
    static func usage(_ message: String) -> AdminFailure { AdminFailure(message: message) }

    /// Writes `error` on standard error and returns the exit status it earns (64: what was given is wrong).
    static func report(_ error: any Error) -> ExitCode {
        let (message, status): (String, Int32)
        switch error {
        case let error as AdminFailure:
            (message, status) = (error.message, 64)
        case let error as AdministrationError:
            switch error {
            case .noSuchAccount(let email): (message, status) = ("no account has the email \(email).", 64)
            case .notAnEmail(let text): (message, status) = ("\"\(text)\" is not an email address.", 64)
            case .alreadyRegistered(let email): (message, status) = ("\(email) has an account already: there is nothing to invite.", 64)
            case .soleOwner(let names):
                let quoted = names.map { "\"\($0)\"" }.joined(separator: ", ")
                (message, status) = ("""
                    not deleted: the account is the only owner of \(quoted), which \(names.count == 1 ? "has" : "have") other members. \
                    Make another member an owner (or delete the organization), then try again.
                    """, 1)
            }
        case let error as ExitCode:
            return error
        default:
            (message, status) = ("\(error)", 1)
        }
        FileHandle.standardError.write(Data("Error: \(message)\n".utf8))
        return ExitCode(status)
    }
}

/// Dates as administrators read them: UTC, to the minute.
enum AdminDates {
    static func text(_ micros: Int64?) -> String {
        guard let micros else { return "never" }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        return formatter.string(from: Date(timeIntervalSince1970: Double(micros) / 1_000_000))
    }

    static func iso(_ micros: Int64?) -> Any {
        guard let micros else { return NSNull() }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(micros) / 1_000_000))
    }
}

struct UsersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users", abstract: "List, show, disable, enable or delete accounts.",
        subcommands: [List.self, Show.self, Disable.self, Enable.self, Delete.self])

    static func json(_ account: AccountSummary) -> [String: Any] {
        ["id": account.id, "email": account.email, "name": account.name ?? NSNull(), "created": AdminDates.iso(account.createdAt),
         "disabled": AdminDates.iso(account.disabledAt), "sessions": account.sessions, "lastSeen": AdminDates.iso(account.lastSeenAt),
         "items": account.items, "organizations": account.organizations, "twoStepLogin": account.twoStepLogin]
    }

    static func printJSON(_ value: Any) throws {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        print(String(decoding: data, as: UTF8.self))
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every account: email, dates, sessions, items, status.")
        @ParentCommand var server: ServerCommand
        @Flag(help: "Print JSON (an array of accounts) instead of a table.") var json = false

        func run() async throws {
            try await AdminDatabase.run(server) { administration in
                let accounts = try await administration.accounts()
                if json { return try UsersCommand.printJSON(accounts.map(UsersCommand.json)) }
                guard !accounts.isEmpty else { return print("No accounts yet.") }
                let rows = [["EMAIL", "CREATED", "LAST SEEN", "SESSIONS", "ITEMS", "STATUS"]] + accounts.map {
                    [$0.email, AdminDates.text($0.createdAt), AdminDates.text($0.lastSeenAt), String($0.sessions), String($0.items),
                     $0.disabledAt == nil ? "enabled" : "disabled"]
                }
                let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
                for row in rows {
                    print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                        .trimmingCharacters(in: .whitespaces))
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "One account in detail.")
        @ParentCommand var server: ServerCommand
        @Argument(help: "The account's email.") var email: String
        @Flag(help: "Print JSON instead of text.") var json = false

        func run() async throws {
            try await AdminDatabase.run(server) { administration in
                let account = try await administration.account(email: email)
                if json { return try UsersCommand.printJSON(UsersCommand.json(account)) }
                print("""
                    Email:           \(account.email)
                    Name:            \(account.name ?? "(none)")
                    Id:              \(account.id)
                    Created:         \(AdminDates.text(account.createdAt))
                    Status:          \(account.disabledAt.map { "disabled since \(AdminDates.text($0))" } ?? "enabled")
                    Sessions:        \(account.sessions) signed-in device\(account.sessions == 1 ? "" : "s"), last seen \(AdminDates.text(account.lastSeenAt))
                    Items:           \(account.items) (encrypted; not readable here)
                    Organizations:   \(account.organizations)
                    Two-step login:  \(account.twoStepLogin ? "on" : "off")
                    """)
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Refuse the account's logins and end its sessions now.")
        @ParentCommand var server: ServerCommand
        @Argument(help: "The account's email.") var email: String

        func run() async throws {
            try await AdminDatabase.run(server) { administration in
                let (email, ended) = try await administration.disable(email: email)
                print("Disabled \(email): it cannot log in, and its \(ended) session\(ended == 1 ? "" : "s") ended. "
                      + "`admin users enable \(email)` undoes it.")
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Let a disabled account log in again.")
        @ParentCommand var server: ServerCommand
        @Argument(help: "The account's email.") var email: String

        func run() async throws {
            try await AdminDatabase.run(server) { administration in
                let account = try await administration.enable(email: email)
                print("Enabled \(account.email): it can log in again (its devices sign in anew).")
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete the account and its vault for good.",
            discussion: "On a terminal it asks you to type the email; scripts give --yes.")
        @ParentCommand var server: ServerCommand
        @Argument(help: "The account's email.") var email: String
        @Flag(help: "Do not ask (scripts).") var yes = false

        func run() async throws {
            try await AdminDatabase.run(server) { administration in
                let account = try await administration.account(email: email)
                if !yes {
                    guard isatty(STDIN_FILENO) == 1 else {
                        throw AdminFailure.usage("deleting \(account.email) cannot be undone: confirm with --yes (standard input is not a terminal).")
                    }
                    FileHandle.standardOutput.write(Data("""
                        Delete \(account.email), its \(account.items) item\(account.items == 1 ? "" : "s") and attachments, for good? \
                        Type the email to confirm: 
                        """.utf8))
                    guard let typed = readLine(), typed.trimmingCharacters(in: .whitespaces).lowercased() == account.email.lowercased() else {
                        print("Not deleted.")
                        throw ExitCode(1)
                    }
                }
                let organizations = try await administration.delete(email: account.email)
                print("Deleted \(account.email)" + (organizations > 0 ? " and the \(organizations) organization\(organizations == 1 ? "" : "s") it was alone in." : "."))
            }
        }
    }
}

struct InviteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invite",
        abstract: "Let an address register while sign-ups are closed (--signups-allowed false).",
        discussion: "No mail is sent: tell the person to register with this address. `admin invite --list` shows the open invitations.")
    @ParentCommand var server: ServerCommand
    @Argument(help: "The address to invite.") var email: String?
    @Flag(help: "List the invitations not used yet.") var list = false

    func validate() throws {
        guard list != (email != nil) else { throw ValidationError("give an email to invite, or --list") }
    }

    func run() async throws {
        try await AdminDatabase.run(server) { administration in
            if list {
                let invitations = try await administration.invitations()
                guard !invitations.isEmpty else { return print("No open invitations.") }
                for invitation in invitations { print("\(invitation.email)  invited \(AdminDates.text(invitation.invitedAt))") }
                return
            }
            let invited = try await administration.invite(email: email ?? "")
            let closed = server.signupsDisabled
            print("Invited \(invited): they may register now"
                  + (closed ? "." : " (sign-ups are open to everyone on this configuration; --signups-allowed false closes them to others)."))
        }
    }
}

struct SessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sessions", abstract: "End an account's sessions.",
                                                    subcommands: [Revoke.self])

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End every session of the account: each device signs in again.")
        @ParentCommand var server: ServerCommand
        @Argument(help: "The account's email.") var email: String

        func run() async throws {
            try await AdminDatabase.run(server) { administration in
                let (email, count) = try await administration.revokeSessions(email: email)
                print("Ended \(count) session\(count == 1 ? "" : "s") of \(email); its devices sign in again.")
            }
        }
    }
}
