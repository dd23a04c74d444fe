package hysteria2

import (
	"reflect"
	"unsafe"

	"github.com/apernet/hysteria/core/v2/client"
	"github.com/apernet/quic-go"

	"switchyard/internal/pressure"
)

var _ pressure.CounterSource = (*Outbound)(nil)

// CarrierCounters reads the statistics of the QUIC connection in service,
// for carrier-pressure sampling (pressure.CounterSource): smoothed RTT,
// packets and bytes sent and bytes received (quic-go's ConnectionStats),
// the packets acknowledged and those declared lost, with their bytes (the
// connection's lossMeter: quic-go counts neither under core/v2's
// controllers), and the DATAGRAM frames this outbound's UDP sessions sent
// on it. Payload progress is the bytes acknowledged plus those received. ok is false while no
// connection is in service. The connection's generation in the slot names
// the carrier, so a reconnect starts a new interval.
func (o *Outbound) CarrierCounters() (c pressure.Counters, ok bool) {
	r, ok := o.slot.Current()
	if !ok {
		return c, false
	}
	qc := quicConnOf(r.V.client)
	if qc == nil {
		return c, false
	}
	f, ok := r.V.family()
	if !ok {
		return c, false
	}
	m := r.V.loss
	if m == nil {
		// Without the meter neither fresh acknowledgements nor losses
		// are known: no interval could be judged.
		return c, false
	}
	st := qc.ConnectionStats()
	return pressure.Counters{
		Carrier:       r.Gen,
		Family:        f,
		RTT:           st.SmoothedRTT,
		Acked:         m.ackedPackets.Load(),
		Payload:       m.ackedBytes.Load() + st.BytesReceived,
		Sent:          st.BytesSent,
		Datagrams:     r.V.datagrams.Load(),
		Transmissions: st.PacketsSent,
		Lost:          m.packets.Load(),
		LostBytes:     m.bytes.Load(),
	}, true
}

// quicConnType is the connection type core/v2's client keeps.
var quicConnType = reflect.TypeFor[*quic.Conn]()

// quicConnOf is the QUIC connection under a core/v2 client. core/v2 keeps
// it in its client's unexported conn field and offers no accessor, while
// the connection's own ConnectionStats is what pressure sampling reads;
// the field is found by name and type, and a client of another shape
// (a core/v2 that moved it) yields nil: no statistics, unknown intervals.
// The field is set before NewClient returns and never written again.
func quicConnOf(cl client.Client) *quic.Conn {
	v := reflect.ValueOf(cl)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("conn")
	if !f.IsValid() || f.Type() != quicConnType {
		return nil
	}
	return *(**quic.Conn)(unsafe.Pointer(f.UnsafeAddr()))
}
