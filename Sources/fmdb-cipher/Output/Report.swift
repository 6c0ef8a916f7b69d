import Foundation

/// What a command reports (`info`, `check`, `keys list`), built once as one value and said as the operator asks:
/// with `--json`, the value's `Encodable` form (`Output.json`: pretty, keys sorted); otherwise its `lines`, for a
/// person. Both are made from the same value, so the text and the JSON cannot say different things.
protocol Report: Encodable {
    /// The report as text, one element a line.
    var lines: [String] { get }
}
