import Foundation

/// A parsed JSON value (YAML arrives here through JSON), read with subscripts that never trap:
/// a missing key or index gives a node whose `value` is nil.
struct JSONNode {
    let value: Any?

    init(_ value: Any?) { self.value = value }

    init(parsing data: Data) throws {
        value = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
    }

    init(parsing text: String) throws {
        try self.init(parsing: Data(text.utf8))
    }

    subscript(key: String) -> JSONNode { JSONNode(dictionary?[key]) }

    subscript(index: Int) -> JSONNode {
        guard let items = value as? [Any], items.indices.contains(index) else { return JSONNode(nil) }
        return JSONNode(items[index])
    }

    var exists: Bool { value != nil }
    var isObject: Bool { dictionary != nil }
    var string: String? { value as? String }
    var int: Int? { value as? Int }
    var bool: Bool? { value as? Bool }
    var array: [JSONNode] { (value as? [Any])?.map(JSONNode.init) ?? [] }
    var keys: Set<String> { Set(dictionary?.keys.map { $0 } ?? []) }
    var strings: [String] { array.compactMap(\.string) }

    /// Every object nested anywhere in this value, this one included, depth first.
    var allObjects: [JSONNode] {
        var found: [JSONNode] = isObject ? [self] : []
        if let dictionary {
            for key in dictionary.keys.sorted() { found += JSONNode(dictionary[key]).allObjects }
        } else {
            for item in array { found += item.allObjects }
        }
        return found
    }

    private var dictionary: [String: Any]? { value as? [String: Any] }
}
