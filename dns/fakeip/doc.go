// Package fakeip hands out addresses from reserved ranges as DNS answers,
// so that a flow to such an address can be routed, and dialed, by the name
// it stands for (spec.FakeIP, [dns.fakeip]).
//
// # The table
//
// A Table maps names to addresses and back. Index i of the table stands
// for the address i+1 above the first of each range, so a name gets the
// same index in the IPv4 range and in the IPv6 one, and a reverse lookup
// is arithmetic and one slot, with no map. The first address of a range
// (the network's) and its last (IPv4's broadcast) are never handed out,
// since stacks treat them specially; a range must hold at least one other.
// The ranges should not hold an address the host uses itself (a TUN
// interface's address): the table cannot tell.
//
// A new name gets the lowest free index. The table keeps Config.Size
// mappings (DefaultSize, 65,536, a /16's worth; never more than either
// range numbers; at most MaxSize); when it is full, the least recently
// used mapping is dropped and its addresses go to the new name. A use is a
// Lookup of the name or a Name of either address, so a mapping whose
// flows keep coming stays. A recycled address that an application still
// has cached now means another name: this is why answers live TTL (1 s),
// and why the table is large.
//
// Names are compared in ASCII lowercase without their trailing dot; a name
// longer than a DNS name can be (253 bytes) gets no address, which bounds
// the table's memory to Size names. A Lookup hit of a lowercase name
// allocates nothing; one mutex guards the table, held for a map access and
// a few list moves.
//
// Filter lists domain suffixes whose names get real answers (local names,
// names whose real address matters). A name is filtered when it equals an
// entry or lies under it; matching looks up each label-aligned suffix of
// the name in a set.
//
// # Persistence
//
// Snapshot and Restore carry the mappings, with their addresses and last
// use, across restarts (the supervisor keeps them in the state store), so
// that addresses applications cached stay meaningful. MarshalBinary and
// UnmarshalBinary are the same in a compact binary form. Restore keeps
// only mappings whose addresses this table hands out, the most recently
// used first, so a changed range or a smaller size drops the rest.
//
// # Answers
//
// Answerer is the DNS service's hook (serve.FakeIP): A and AAAA questions
// for names that are not filtered and whose flows go through a proxy get
// fake answers, with TTL 1 second (as mihomo answers); an AAAA question
// with no IPv6 range, or an A question with no IPv4 range, gets an empty
// NOERROR answer so that the client uses the family there is. Every other
// question is left to the resolvers.
package fakeip
