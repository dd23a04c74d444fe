package config

import (
	"math"
	"slices"

	"switchyard/spec"
)

// hysteria2 lowers a Hysteria 2 client: QUIC to the server, always under
// TLS. Without a tls table the client verifies the server's host with the
// system roots. The ALPN is always h3 (HTTP/3): written or filled in.
func (l *lowerer) hysteria2(key string, f *fileOutbound, o *spec.Outbound) {
	o.AddressFamily = l.enum(key+".address_family", f.AddressFamily, defaultAddressFamily, addressFamilies)
	host := l.server(key, f, o)
	o.Password, _ = l.required(key+".password", f.Password)
	o.Obfs = l.obfs(key+".obfs", f.Obfs)
	o.UpMbps = l.mbps(key+".up_mbps", f.UpMbps)
	o.DownMbps = l.mbps(key+".down_mbps", f.DownMbps)
	o.MaxConcurrentStreams = l.maxStreams(key+".max_concurrent_streams", f.MaxConcurrentStreams)
	if f.TLS == nil {
		o.TLS = &spec.TLS{ServerName: host, ALPN: slices.Clone(hysteria2ALPN)}
		return
	}
	o.TLS = l.tls(key+".tls", f.TLS, host, true)
	switch {
	case f.TLS.ALPN == nil:
		o.TLS.ALPN = slices.Clone(hysteria2ALPN)
	case !slices.Equal(f.TLS.ALPN, hysteria2ALPN):
		l.errorf(key+".tls.alpn", `Hysteria 2 runs over HTTP/3: alpn is ["h3"] or left out`)
	}
}

// obfs lowers a Hysteria 2 obfuscation table; nil when it is not written.
// The password is a secret: a problem does not repeat it.
func (l *lowerer) obfs(key string, f *fileObfs) *spec.Obfs {
	if f == nil {
		return nil
	}
	o := &spec.Obfs{}
	if typ, ok := l.required(key+".type", f.Type); ok && l.oneOf(key+".type", typ, obfsTypes) {
		o.Type = typ
	}
	if pw, ok := l.required(key+".password", f.Password); ok {
		if len(pw) < salamanderMinPassword {
			l.errorf(key+".password", "salamander takes a password of at least %d bytes; this is %d", salamanderMinPassword, len(pw))
		} else {
			o.Password = pw
		}
	}
	return o
}

// mbps lowers a Hysteria 2 bandwidth in megabits per second; 0 when it is
// not written.
func (l *lowerer) mbps(key string, v *int64) int {
	if v == nil {
		return 0
	}
	if *v < 0 || *v > math.MaxInt32 {
		l.errorf(key, "%d is out of range 0..%d", *v, math.MaxInt32)
		return 0
	}
	return int(*v)
}

// maxStreams lowers the cap on a Hysteria 2 client's TCP streams open at
// once on its connection; the default when it is not written.
func (l *lowerer) maxStreams(key string, v *int64) int {
	if v == nil {
		return defaultHysteria2MaxStreams
	}
	if *v < 1 || *v > math.MaxInt32 {
		l.errorf(key, "%d is out of range 1..%d", *v, math.MaxInt32)
		return defaultHysteria2MaxStreams
	}
	return int(*v)
}
