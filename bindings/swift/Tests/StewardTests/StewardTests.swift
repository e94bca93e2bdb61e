import Foundation
import XCTest

@testable import Steward

/// The launcher's calls, end to end: open a home, mirror a Maildir, search, typed errors.
/// (The same library is exercised through UniFFI's Python bindings by scripts/test, where no
/// Swift compiler is available.)
final class StewardTests: XCTestCase {
    private func tempDir() throws -> URL {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("steward-swift-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    private func writeMaildir(_ root: URL) throws -> URL {
        let cur = root.appendingPathComponent("Maildir/cur")
        try FileManager.default.createDirectory(at: cur, withIntermediateDirectories: true)
        try "From: a@example.org\nSubject: one\nMessage-ID: <1@x>\n\nhello\n"
            .write(to: cur.appendingPathComponent("1:2,S"), atomically: true, encoding: .utf8)
        try "From: b@example.org\nSubject: Re: one\nMessage-ID: <2@x>\nIn-Reply-To: <1@x>\n\nhi\n"
            .write(to: cur.appendingPathComponent("2:2,"), atomically: true, encoding: .utf8)
        return root.appendingPathComponent("Maildir")
    }

    func testIndexSearchAndCount() throws {
        let dir = try tempDir()
        let steward = try Steward.open(home: dir.appendingPathComponent("home").path)
        let summary = try steward.indexMaildir(path: try writeMaildir(dir).path, account: "swift")
        XCTAssertEqual(summary.added, 2)
        XCTAssertEqual(summary.threads, 1)
        let page = try steward.search(query: SearchQuery(text: "hello"))
        XCTAssertEqual(page.hits.map(\.subject), ["one"])
        XCTAssertEqual(try steward.mirrorStats().messagesLive, 2)
    }

    func testErrorsCarryKindAndCode() throws {
        let dir = try tempDir()
        let steward = try Steward.open(home: dir.appendingPathComponent("home").path)
        XCTAssertThrowsError(try steward.indexMaildir(path: dir.appendingPathComponent("missing").path, account: nil)) { error in
            guard case let FfiError.Steward(kind, code, _) = error else {
                return XCTFail("unexpected \(error)")
            }
            XCTAssertEqual(kind, "not_found")
            XCTAssertEqual(code, "MAIL_SOURCE_NOT_FOUND")
        }
        XCTAssertThrowsError(try steward.search(query: SearchQuery(limit: 0))) { error in
            guard case let FfiError.Steward(_, code, _) = error else {
                return XCTFail("unexpected \(error)")
            }
            XCTAssertEqual(code, "LIMIT_OUT_OF_RANGE")
        }
    }

    func testAsyncSyncStatusAndUsage() async throws {
        let dir = try tempDir()
        let steward = try Steward.open(home: dir.appendingPathComponent("home").path)
        let never = steward.status().items.first { $0.name == "ingest" }
        XCTAssertEqual(never?.detail, "never synced")
        let summary = try await steward.indexMaildirAsync(path: try writeMaildir(dir).path, account: "swift")
        XCTAssertEqual(summary.added, 2)
        XCTAssertEqual(try steward.search(query: SearchQuery(text: "hello")).hits.map(\.subject), ["one"])
        XCTAssertNotEqual(steward.status().items.first { $0.name == "ingest" }?.status, "unknown")
        let cost = try steward.usage(since: "7d")
        XCTAssertEqual(cost.total.requests, 0)
        XCTAssertThrowsError(try steward.usage(since: "last week")) { error in
            guard case let FfiError.Steward(_, code, _) = error else {
                return XCTFail("unexpected \(error)")
            }
            XCTAssertEqual(code, "USAGE_BAD_SINCE")
        }
    }
}
