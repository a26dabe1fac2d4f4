/// One counter value owned outside ``Metrics`` (a gateway's token refreshes and connections), already
/// labelled, for the exposition: `name{labels} value` under `# HELP name help`.
struct CounterSample: Sendable {
    var name: String
    var help: String
    /// The label text inside the braces, for example `environment="sandbox"`.
    var labels: String
    var value: Int
}
