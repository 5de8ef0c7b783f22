import AsyncHTTPClient

/// One HTTP client for raw API calls in tests (the engines have their own).
enum HTTPClientHolder {
    static let shared = HTTPClient(eventLoopGroupProvider: .singleton)
}
