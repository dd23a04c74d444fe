// Package layers holds the test that keeps the module's imports inside its
// layering rules: protocol codecs know no sockets, outbounds or anything above
// them; transports know no outbounds; only the command wires the supervisor.
package layers
