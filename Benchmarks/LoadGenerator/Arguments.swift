import Foundation

/// `--name value` options of one subcommand; an option given again adds a value (`--pid` names
/// several processes), and the single-valued readers take the last one.
struct Arguments {
    private var values: [String: [String]] = [:]

    init(_ arguments: [String]) throws(LoadError) {
        var index = 0
        while index < arguments.count {
            let name = arguments[index]
            guard name.hasPrefix("--"), index + 1 < arguments.count else {
                throw LoadError(.usage, "expected --name value, got '\(name)'")
            }
            values[String(name.dropFirst(2)), default: []].append(arguments[index + 1])
            index += 2
        }
    }

    func string(_ name: String) throws(LoadError) -> String {
        guard let value = values[name]?.last else { throw LoadError(.usage, "--\(name) is required") }
        return value
    }

    func string(_ name: String, default value: String) -> String { values[name]?.last ?? value }

    /// Every value given for `--name`, in order.
    func all(_ name: String) -> [String] { values[name] ?? [] }

    func integer(_ name: String, default value: Int) throws(LoadError) -> Int {
        guard let text = values[name]?.last else { return value }
        guard let number = Int(text) else { throw LoadError(.usage, "--\(name) must be an integer") }
        return number
    }

    func number(_ name: String, default value: Double) throws(LoadError) -> Double {
        guard let text = values[name]?.last else { return value }
        guard let number = Double(text) else { throw LoadError(.usage, "--\(name) must be a number") }
        return number
    }
}
