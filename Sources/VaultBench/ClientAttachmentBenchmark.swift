import Crypto
import Foundation
import VaultClient
import VaultModels
import VaultServer
import VaultTestSupport

/// A2: one large attachment through the client library as a person's command moves it — `addAttachment`
/// (read the file, encrypt it piece by piece into the profile's staging, announce, upload from there) and
/// `saveAttachment` (download into the cache folder, verify the MAC, decrypt piece by piece into a sink
/// that hashes it; no read cache, so it is downloaded) — against the real server on loopback, in this process. The client runs in a child
/// of its own (`VaultBench --child a2`), so its peak RSS is the client's alone. The reference is AES-256-CBC
/// plus HMAC-SHA256 of the same bytes (A1's). Goal (issue 23): a 500 MiB file with peak RSS under 150 MiB.
enum ClientAttachmentBenchmark {
    struct Input: Codable {
        var mib: Int
        var url: String
    }

    struct Output: Codable {
        var addSeconds: Double
        var getSeconds: Double
        var peakBeforeMiB: Double
        var peakMiB: Double
        var bytesMatch: Bool
    }

    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let mib = options.quick ? 100 : 500
        let reference = try AttachmentBenchmark.cryptoThroughput(mib: options.quick ? 32 : 128)
        let server = LiveServer(configure: { $0.maxAttachmentBytes = (mib + 1) << 20 })
        try await server.start()
        let output: Output
        do {
            output = try await runChild("a2", input: Input(mib: mib, url: await server.url), as: Output.self)
            await server.destroy()
        } catch {
            await server.destroy()
            throw error
        }
        let add = Double(mib) / output.addSeconds
        let get = Double(mib) / output.getSeconds
        return [
            BenchResult(id: "A2-add", what: "attachment add of a \(mib) MiB file: encrypt, stage, upload (MiB/s)", value: add, unit: "MiB/s",
                        reference: reference, referenceWhat: "AES-256-CBC + HMAC-SHA256 of the same bytes (MiB/s)", ratio: add / reference,
                        goal: "bytes match", met: output.bytesMatch),
            BenchResult(id: "A2-get", what: "attachment get of it: download, verify, decrypt (MiB/s)", value: get, unit: "MiB/s",
                        reference: reference, referenceWhat: "AES-256-CBC + HMAC-SHA256 of the same bytes (MiB/s)", ratio: get / reference,
                        goal: "bytes match", met: output.bytesMatch),
            BenchResult(id: "A2-rss", what: "peak RSS of the client process", value: output.peakMiB, unit: "MiB",
                        reference: output.peakBeforeMiB, referenceWhat: "its peak before the file", ratio: output.peakMiB / output.peakBeforeMiB,
                        goal: "< 150 MiB for a 500 MiB file", met: mib == 500 ? output.peakMiB < 150 : nil),
        ]
    }

    /// In the child: an account and an item through the engine, then the file in and out.
    static func child() async throws {
        // As the CLI does at start (ProcessMemory).
        ProcessMemory.keepLargeBuffersOutOfHeaps()
        let input = try readChildInput(Input.self)
        let folder = temporaryDirectory("vaultsync-bench-a2")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // The plaintext file a person attaches, written a piece at a time (never whole in memory).
        let source = folder + "/big.bin"
        var expected = SHA256()
        _ = FileManager.default.createFile(atPath: source, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: source))
        var piece = [UInt8](repeating: 0, count: 1 << 20)
        for index in 0..<input.mib {
            for offset in stride(from: 0, to: piece.count, by: 8) { piece[offset] = UInt8(truncatingIfNeeded: index &* 31 &+ offset >> 8) }
            // 4 KiB short of the size: encrypted, the file stays within Bitwarden's 500 MiB.
            let bytes = index == input.mib - 1 ? piece[0..<(piece.count - 4096)] : piece[...]
            expected.update(data: bytes)
            try handle.write(contentsOf: bytes)
        }
        try handle.close()

        // No read cache: the file added is not kept, so the get below downloads it.
        var configuration = EngineConfiguration(serverURL: input.url)
        configuration.attachmentCacheBytes = 0
        let engine = try VaultEngine(databasePath: folder + "/vault.sqlite", configuration: configuration, logger: quietLogger())
        try await engine.register(email: "a2@bench.local", password: "bench password a2", kdf: BenchAccount.kdf)
        let item = try await engine.addItem(CipherView(type: .secureNote, name: "Archive")).value
        guard let itemID = item.id else { throw ChildProcessError.unreadable("a2", output: "no item id") }
        let peakBefore = peakRSSMiB()
        let clock = ContinuousClock()
        let addStart = clock.now
        let added = try await engine.addAttachment(itemID: itemID, fileAt: source, fileName: "big.bin")
        let addTime = clock.now - addStart
        let hash = Hasher256()
        let getStart = clock.now
        _ = try await engine.saveAttachment(itemID: itemID, attachmentID: added.id) { hash.update($0) }
        let getTime = clock.now - getStart
        await engine.shutdown()
        try writeChildOutput(Output(addSeconds: AttachmentBenchmark.seconds(addTime), getSeconds: AttachmentBenchmark.seconds(getTime),
                                    peakBeforeMiB: peakBefore, peakMiB: peakRSSMiB(), bytesMatch: !added.pending && hash.digest == expected.finalize()))
    }

    /// SHA-256 fed from the engine's sink.
    final class Hasher256: @unchecked Sendable {
        private let lock = NSLock()
        private var hash = SHA256()

        func update(_ piece: ArraySlice<UInt8>) { lock.withLock { piece.withUnsafeBytes { hash.update(bufferPointer: $0) } } }
        var digest: SHA256.Digest { lock.withLock { hash.finalize() } }
    }
}
