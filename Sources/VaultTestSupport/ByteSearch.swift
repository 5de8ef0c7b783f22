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
