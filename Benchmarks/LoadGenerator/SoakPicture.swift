/// `soak.svg`: a soak's behaviour second by second, as plain SVG text (pure: records in, text out). Three panels on
/// one time axis: answers per second by status, the p99 latency, each relay's RSS; every injected fault is a vertical
/// line across all three with its name, so that an effect can be read against its cause.
struct SoakPicture: Sendable {
    /// A fault as it was injected: when, and which kind.
    struct Mark: Equatable, Sendable {
        var at: Double
        var name: String
    }

    /// The statuses drawn, in order, and their colours; answers of other statuses are "other", and requests with no
    /// answer (closed, timed out) "none".
    static let series: [(name: String, colour: String)] = [
        ("200", "#2a9d3f"), ("429", "#e0a800"), ("502", "#d9480f"), ("503", "#7048e8"), ("other", "#868e96"),
        ("none", "#000000"),
    ]

    var seconds: Int
    /// Per second, answers by series name.
    var answers: [[String: Int]]
    /// Per second, the p99 latency of the answers that came in it (milliseconds), nil without answers.
    var p99: [Double?]
    /// Per relay, per second, the RSS in megabytes (nil when not sampled).
    var rss: [[Double?]]
    var marks: [Mark]

    init(seconds: Int, attempts: [SoakAttempt], samples: [SoakSample], relays: Int, marks: [Mark]) {
        let span = max(1, seconds)
        self.seconds = span
        var answers = [[String: Int]](repeating: [:], count: span)
        var latencies = [[Double]](repeating: [], count: span)
        for attempt in attempts {
            let second = min(span - 1, max(0, Int(attempt.ended)))
            let name: String
            switch (attempt.ending, attempt.status) {
            case (.answered, 200), (.answered, 429), (.answered, 502), (.answered, 503): name = String(attempt.status)
            case (.answered, _): name = "other"
            default: name = "none"
            }
            answers[second][name, default: 0] += 1
            if attempt.ending == .answered { latencies[second].append((attempt.ended - attempt.sent) * 1000) }
        }
        self.answers = answers
        p99 = latencies.map { values in
            guard !values.isEmpty else { return nil }
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1))]
        }
        var rss = [[Double?]](repeating: [Double?](repeating: nil, count: span), count: relays)
        for sample in samples where sample.relay < relays {
            let second = Int(sample.at)
            if second >= 0 && second < span { rss[sample.relay][second] = Double(sample.rssKilobytes) / 1024 }
        }
        self.rss = rss
        self.marks = marks
    }

    static let width = 1000.0
    static let left = 70.0
    static let right = 20.0
    static let panelHeight = 170.0
    static let gap = 40.0
    static let top = 30.0

    var svg: String {
        let plotWidth = Self.width - Self.left - Self.right
        let height = Self.top + 3 * (Self.panelHeight + Self.gap) + 30
        func x(_ second: Double) -> Double { Self.left + plotWidth * second / Double(seconds) }
        var out: [String] = [
            ##"<svg xmlns="http://www.w3.org/2000/svg" width="\##(Int(Self.width))" height="\##(Int(height))" "##
                + ##"font-family="sans-serif" font-size="11">"##,
            ##"<rect width="100%" height="100%" fill="white"/>"##,
        ]
        func panel(_ index: Int, title: String, unit: String, lines: [(String, String, [Double?])]) {
            let top = Self.top + Double(index) * (Self.panelHeight + Self.gap)
            let bottom = top + Self.panelHeight
            let highest = max(1, lines.flatMap { $0.2.compactMap { $0 } }.max() ?? 1)
            func y(_ value: Double) -> Double { bottom - Self.panelHeight * value / highest }
            out.append(##"<text x="\##(Self.left)" y="\##(top - 8)" font-size="13">\##(title)</text>"##)
            out.append(
                ##"<rect x="\##(Self.left)" y="\##(top)" width="\##(plotWidth)" height="\##(Self.panelHeight)" "##
                    + ##"fill="none" stroke="#ced4da"/>"##)
            out.append(
                ##"<text x="\##(Self.left - 6)" y="\##(top + 4)" text-anchor="end">"##
                    + JSONText.number(highest, digits: highest < 10 ? 1 : 0) + " \(unit)</text>")
            out.append(##"<text x="\##(Self.left - 6)" y="\##(bottom)" text-anchor="end">0</text>"##)
            var legend = Self.left + plotWidth
            for (name, colour, values) in lines.reversed() {
                var points: [String] = []
                var segments: [String] = []
                for (second, value) in values.enumerated() {
                    if let value {
                        points.append(
                            JSONText.number(x(Double(second) + 0.5), digits: 1) + ","
                                + JSONText.number(y(value), digits: 1))
                    } else if !points.isEmpty {
                        segments.append(points.joined(separator: " "))
                        points = []
                    }
                }
                if !points.isEmpty { segments.append(points.joined(separator: " ")) }
                for segment in segments {
                    out.append(
                        ##"<polyline fill="none" stroke="\##(colour)" stroke-width="1.2" points="\##(segment)"/>"##)
                }
                legend -= 8 + 7 * Double(name.count) + 14
                out.append(##"<rect x="\##(legend)" y="\##(top - 17)" width="10" height="10" fill="\##(colour)"/>"##)
                out.append(##"<text x="\##(legend + 14)" y="\##(top - 8)">\##(name)</text>"##)
            }
        }
        panel(
            0, title: "answers per second by status", unit: "/s",
            lines: Self.series.map { series in
                (series.name, series.colour, answers.map { Double($0[series.name, default: 0]) })
            })
        panel(1, title: "p99 latency", unit: "ms", lines: [("p99", "#1c7ed6", p99)])
        let relayColours = ["#1c7ed6", "#e8590c", "#5c940d", "#862e9c"]
        panel(
            2, title: "relay RSS", unit: "MB",
            lines: rss.enumerated().map {
                ("relay \($0.offset)", relayColours[$0.offset % relayColours.count], $0.element)
            }
        )
        let bottom = Self.top + 3 * (Self.panelHeight + Self.gap) - Self.gap
        for mark in marks {
            let position = JSONText.number(x(mark.at), digits: 1)
            out.append(
                ##"<line x1="\##(position)" y1="\##(Self.top)" x2="\##(position)" y2="\##(bottom)" stroke="#c92a2a" "##
                    + ##"stroke-opacity="0.5" stroke-dasharray="3,3"><title>\##(mark.name)</title></line>"##)
            out.append(
                ##"<text x="\##(position)" y="\##(bottom + 12)" font-size="9" fill="#c92a2a" "##
                    + ##"transform="rotate(45 \##(position) \##(bottom + 12))">\##(mark.name)</text>"##)
        }
        for tick in stride(from: 0, through: seconds, by: max(10, (seconds / 10 + 9) / 10 * 10)) {
            out.append(
                ##"<text x="\##(JSONText.number(x(Double(tick)), digits: 1))" y="\##(height - 8)" "##
                    + ##"text-anchor="middle">\##(tick) s</text>"##)
        }
        out.append("</svg>")
        return out.joined(separator: "\n") + "\n"
    }
}
