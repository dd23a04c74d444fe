package probe

import "testing"

func TestDNSQuery(t *testing.T) {
	q := appendQuery(nil, 0xabcd)
	want := []byte{
		0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
		3, 'w', 'w', 'w', 7, 'g', 's', 't', 'a', 't', 'i', 'c', 3, 'c', 'o', 'm', 0,
		0, 1, 0, 1,
	}
	if string(q) != string(want) {
		t.Fatalf("query % x\nwant  % x", q, want)
	}
	if string(appendQuery(nil, 0)) != string(dnsQuery) {
		t.Fatal("appendQuery changed the template")
	}
}

func TestCheckReply(t *testing.T) {
	const id = 0x1234
	q := appendQuery(nil, id)
	ok := map[string][]byte{
		"NOERROR":  response(q, 0),
		"SERVFAIL": response(q, 2),
		"REFUSED":  response(q, 5),
		"truncated": func() []byte {
			p := response(q, 0)
			p[2] |= 0x02
			return p
		}(),
		"an uppercase question": func() []byte {
			p := response(q, 0)
			copy(p[13:16], "WWW")
			return p
		}(),
		"no question": func() []byte {
			p := response(q, 1)[:12]
			p[5] = 0
			return p
		}(),
		"an answer after the question": append(response(q, 0),
			0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1),
		"a question by pointer": func() []byte {
			// The name is written once, after the question that points at it.
			p := response(q, 0)[:12]
			p = append(p, 0xc0, 18, 0, 1, 0, 1)
			return appendName(p, DNSName)
		}(),
	}
	for name, p := range ok {
		if err := checkReply(p, id); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string][]byte{
		"the query itself": q,
		"another ID":       response(appendQuery(nil, id+1), 0),
		"short":            response(q, 0)[:11],
		"an opcode":        func() []byte { p := response(q, 0); p[2] |= 2 << 3; return p }(),
		"another name":     func() []byte { p := response(q, 0); p[14] = 'x'; return p }(),
		"another type":     func() []byte { p := response(q, 0); p[len(p)-3] = 28; return p }(),
		"another class":    func() []byte { p := response(q, 0); p[len(p)-1] = 3; return p }(),
		"a cut question":   response(q, 0)[:len(q)-2],
		"a dotted label": func() []byte {
			p := response(q, 0)[:12]
			p = append(p, 11)
			p = append(p, "www.gstatic"...)
			p = append(p, 3, 'c', 'o', 'm', 0, 0, 1, 0, 1)
			return p
		}(),
		"a pointer loop": func() []byte {
			p := response(q, 0)[:12]
			return append(p, 0xc0, 12, 0, 1, 0, 1)
		}(),
		"a reserved label type": func() []byte {
			p := response(q, 0)[:12]
			return append(p, 0x40, 0, 0, 1, 0, 1)
		}(),
	}
	for name, p := range bad {
		if err := checkReply(p, id); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// response turns a query into a response with rcode, keeping its question.
func response(q []byte, rcode byte) []byte {
	p := append([]byte(nil), q...)
	p[2] |= 0x80
	p[3] = 0x80 | rcode
	return p
}
