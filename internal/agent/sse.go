package agent

import "unicode/utf8"

// Bounds of the server-sent events a streamed chat writes. No event is
// larger than sseMaxEventBytes, whatever the model or the caller sent:
// some SSE readers and proxies cap a line, and one event is held whole in
// memory on each side. The reply goes out as deltas of at most
// streamDeltaBytes of text, which JSON escaping (\u00XX) grows at most
// sixfold, and an error's message is cut at sseMaxMessageBytes. The
// stream sets no `retry:`: the chat is a POST, which no client reconnects
// to, and MCP streams are written by the SDK, which sets one only for
// CloseSSEStream, which the runtime never calls.
const (
	sseMaxEventBytes   = 64 << 10
	streamDeltaBytes   = 8 << 10
	sseMaxMessageBytes = 4 << 10
	// truncatedMarker ends a text that was cut.
	truncatedMarker = " … [truncated]"
)

// splitText cuts s into pieces of at most max bytes, between runes, whose
// concatenation is s. An empty s is one empty piece.
func splitText(s string, max int) []string {
	var out []string
	for len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = max
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// truncateText cuts s to at most max bytes, between runes, ending with
// truncatedMarker when it cut.
func truncateText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return splitText(s, max-len(truncatedMarker))[0] + truncatedMarker
}
