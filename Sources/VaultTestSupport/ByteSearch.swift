import Foundation

/// Whether `needle` occurs in `haystack` (memchr for the first byte, memcmp for the rest: fast even in
/// debug builds, for scanning whole database files for secrets).
public func byteSearch(_ haystack: UnsafeRawBufferPointer, contains needle: UnsafeRawBufferPointer) -> Bool {
    guard let hay = haystack.baseAddress, let pattern = needle.baseAddress, needle.count > 0, haystack.count >= needle.count else { return false }
    let first = Int32(needle[0])
    var offset = 0
    let last = haystack.count - needle.count
    while offset <= last {
        guard let found = memchr(hay + offset, first, last - offset + 1) else { return false }
        let position = hay.distance(to: UnsafeRawPointer(found))
        if memcmp(hay + position, pattern, needle.count) == 0 { return true }
        offset = position + 1
    }
    return false
}

/// The bytes of a file that an SQLite connection of this process may have open, read by a child
/// process (`cat`), or nil if it cannot be read.
///
/// Reading such a file directly (`Data(contentsOf:)`, `FileManager.contents(atPath:)`) opens and
/// closes a descriptor on it, and closing any descriptor drops every POSIX advisory lock this process
/// holds on that file (SQLite's own connections included; see "How To Corrupt An SQLite Database
/// File", §2.2). Another process opening the database next (the crash tests' killed child, a second
/// CLI run) then believes it is alone, resets the WAL index under live readers and corrupts the file.
/// A child process's descriptors are its own, so its closing them leaves ours untouched.
public func readFileKeepingLocks(_ path: String) -> Data? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/cat")
    process.arguments = ["--", path]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return nil }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return process.terminationStatus == 0 ? data : nil
}
