import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import VaultCrypto
import VaultModels
import VaultServer
import VaultTestSupport
import _CryptoExtras

/// A1: one large attachment through the real server on loopback — `POST …/attachment/v2`, the upload
/// streamed from a generator, the download streamed into SHA-256 — with the server's peak RSS. The
/// server and the client run in a child process of their own (`VaultBench --child a1`), so the peak is
/// that process's `VmHWM`: the server with the client beside it, an upper bound for the server alone.
/// The reference is the client's own cost for the same bytes: AES-256-CBC plus HMAC-SHA256 (what
/// encrypting the file takes), in this process.
enum AttachmentBenchmark {
    struct Input: Codable {
        var mib: Int
        var postgresURL: String?
    }

    struct Output: Codable {
        var uploadSeconds: Double
        var downloadSeconds: Double
        /// `VmHWM` after start-up, registration and login, before the file.
        var peakBeforeMiB: Double
        var peakMiB: Double
        var bytesMatch: Bool
    }

    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let mib = options.quick ? 100 : 500
        let reference = try cryptoThroughput(mib: options.quick ? 32 : 128)
        var results = try await measure(backend: "SQLite", postgresURL: nil, mib: mib, reference: reference)
        if let adminURL = options.postgresURL {
            let name = "vaultbench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
            let admin = try PostgresDatabase(url: adminURL, logger: Logger(label: "bench-admin"))
            try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
            var components = URLComponents(string: adminURL)!
            components.path = "/\(name)"
            do {
                results += try await measure(backend: "PostgreSQL", postgresURL: components.string, mib: mib, reference: reference)
            } catch {
                try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
                throw error
            }
            try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            await admin.close()
        } else {
            print("A1: PostgreSQL skipped (no --postgres URL and no VAULTSYNC_TEST_POSTGRES_URL)")
        }
        return results
    }

    static func measure(backend: String, postgresURL: String?, mib: Int, reference: Double) async throws -> [BenchResult] {
        let output = try await runChild("a1", input: Input(mib: mib, postgresURL: postgresURL), as: Output.self)
        let up = Double(mib) / output.uploadSeconds
        let down = Double(mib) / output.downloadSeconds
        let label = backend == "SQLite" ? "" : "-PG"
        return [
            BenchResult(id: "A1-up\(label)", what: "upload of a \(mib) MiB attachment, \(backend) (MiB/s)", value: up, unit: "MiB/s",
                        reference: reference, referenceWhat: "AES-256-CBC + HMAC-SHA256 of the same bytes (MiB/s)", ratio: up / reference,
                        goal: "bytes match", met: output.bytesMatch),
            BenchResult(id: "A1-down\(label)", what: "download of it, \(backend) (MiB/s)", value: down, unit: "MiB/s",
                        reference: reference, referenceWhat: "AES-256-CBC + HMAC-SHA256 of the same bytes (MiB/s)", ratio: down / reference,
                        goal: "bytes match", met: output.bytesMatch),
            BenchResult(id: "A1-rss\(label)", what: "peak RSS of the server process (client in it too), \(backend)", value: output.peakMiB,
                        unit: "MiB", reference: output.peakBeforeMiB, referenceWhat: "its peak before the file",
                        ratio: output.peakMiB / output.peakBeforeMiB, goal: "< 150 MiB for a 500 MiB file",
                        met: mib == 500 ? output.peakMiB < 150 : nil),
        ]
    }

    /// MiB/s of AES-256-CBC encryption plus HMAC-SHA256 over `mib` MiB in 1 MiB pieces (best of 3).
    static func cryptoThroughput(mib: Int) throws -> Double {
        let key = SymmetricKey(size: .bits256)
        let macKey = SymmetricKey(size: .bits256)
        let piece = [UInt8](repeating: 0x5a, count: 1 << 20)
        let seconds = try bestOf(3) {
            var hmac = HMAC<SHA256>(key: macKey)
            for _ in 0..<mib {
                let ciphertext = try AES._CBC.encrypt(piece, using: key, iv: AES._CBC.IV())
                hmac.update(data: ciphertext)
            }
            _ = hmac.finalize()
        }
        return Double(mib) / seconds
    }

    /// In the child: a server, an account, an item, then the file up and down.
    static func child() async throws {
        let input = try readChildInput(Input.self)
        let size = input.mib << 20 + 49  // an encrypted file's shape: type, IV, MAC, then the ciphertext
        let server = LiveServer(configure: { configuration in
            configuration.databaseURL = input.postgresURL
            configuration.maxAttachmentBytes = size
        })
        try await server.start()
        do {
            let output = try await transfer(size: size, url: await server.url)
            await server.destroy()
            try writeChildOutput(output)
        } catch {
            await server.destroy()
            throw error
        }
    }

    /// Registers an account, makes an item and an attachment of `size` bytes, then uploads and downloads it.
    static func transfer(size: Int, url: String) async throws -> Output {
        let account = try await BenchAccount.register(url: url)
        let item = try await account.api.rawJSON(.POST, "/api/ciphers", token: account.accessToken,
                                                 body: .object(try account.item(0).encrypted(with: account.keys).requestObject()))
        guard let cipherID = item["id"]?.stringValue else { throw ChildProcessError.unreadable("a1", output: "no item id") }
        let start = try await account.api.rawJSON(.POST, "/api/ciphers/\(cipherID)/attachment/v2", token: account.accessToken, body: .object([
            "key": .string(try EncString.wrap(.generate(), with: account.keys.userKey).serialized),
            "fileName": .string(try EncString.encrypt("big.bin", key: account.keys.userKey).serialized), "fileSize": .int(size),
        ]))
        guard let attachmentID = start["attachmentId"]?.stringValue else { throw ChildProcessError.unreadable("a1", output: "no attachment id") }
        let file = FileStream(size: size)
        let expected = file.digest()
        let peakBefore = peakRSSMiB()

        let clock = ContinuousClock()
        var upload = HTTPClientRequest(url: "\(url)/api/ciphers/\(cipherID)/attachment/\(attachmentID)")
        upload.method = .POST
        upload.headers.add(name: "Authorization", value: "Bearer \(account.accessToken)")
        upload.headers.add(name: "Content-Type", value: "application/octet-stream")
        upload.body = .stream(file, length: .known(Int64(size)))
        let upStart = clock.now
        let uploaded = try await HTTPClient.shared.execute(upload, timeout: .seconds(3600))
        _ = try await uploaded.body.collect(upTo: 1 << 20)
        let upTime = clock.now - upStart
        guard uploaded.status == .ok else { throw ChildProcessError.unreadable("a1", output: "upload answered \(uploaded.status)") }

        let listed = try await account.api.rawJSON(.GET, "/api/ciphers/\(cipherID)", token: account.accessToken)
        guard let link = listed["attachments"]?.arrayValue?.first?.objectValue?["url"]?.stringValue else {
            throw ChildProcessError.unreadable("a1", output: "no download link")
        }
        let downStart = clock.now
        let download = try await HTTPClient.shared.execute(HTTPClientRequest(url: link), timeout: .seconds(3600))
        var hash = SHA256()
        for try await buffer in download.body {
            buffer.withUnsafeReadableBytes { hash.update(bufferPointer: $0) }
        }
        let downTime = clock.now - downStart
        return Output(uploadSeconds: seconds(upTime), downloadSeconds: seconds(downTime), peakBeforeMiB: peakBefore,
                      peakMiB: peakRSSMiB(), bytesMatch: hash.finalize() == expected)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The file, made as it is sent: a random 1 MiB block, each 1 MiB piece stamped with its index.
    struct FileStream: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let size: Int
        let block: [UInt8] = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255) }

        func piece(_ index: Int) -> ByteBuffer {
            let count = Swift.min(1 << 20, size - index << 20)
            var buffer = ByteBuffer(bytes: block[0..<count])
            buffer.setInteger(UInt64(index), at: 1)
            if index == 0 { buffer.setInteger(UInt8(2), at: 0) }
            return buffer
        }

        var pieces: Int { (size + (1 << 20) - 1) >> 20 }

        func digest() -> SHA256.Digest {
            var hash = SHA256()
            for index in 0..<pieces { piece(index).withUnsafeReadableBytes { hash.update(bufferPointer: $0) } }
            return hash.finalize()
        }

        struct Iterator: AsyncIteratorProtocol {
            let file: FileStream
            var index = 0
            mutating func next() async throws -> ByteBuffer? {
                guard index < file.pieces else { return nil }
                defer { index += 1 }
                return file.piece(index)
            }
        }

        func makeAsyncIterator() -> Iterator { Iterator(file: self) }
    }
}
