package hysteria2

import (
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/apernet/hysteria/core/v2/client"
	"github.com/apernet/quic-go"
	"github.com/apernet/quic-go/congestion"
	"github.com/apernet/quic-go/monotime"
)

// lossMeter counts the packets the QUIC stack declares lost and those the
// peer acknowledged, with their bytes, on their way to the congestion
// controller core/v2 installed (BBR or Brutal). The connection statistics
// of quic-go count losses only in its own default controller, which
// core/v2 always replaces, and count no acknowledgements; every lost
// packet (but path MTU probes) passes OnCongestionEvent, and every
// acknowledged packet in flight OnPacketAcked, of whichever controller is
// installed, so a wrapper around core/v2's sees them all. An acknowledged
// packet is what gave the RTT statistics a fresh sample. Every other call
// goes to the wrapped controller unchanged.
type lossMeter struct {
	congestion.CongestionControl
	packets, bytes           atomic.Uint64 // declared lost
	ackedPackets, ackedBytes atomic.Uint64
}

// lossMeterEx is a lossMeter around a controller with the extended
// congestion event (BBR), which keeps receiving it.
type lossMeterEx struct {
	*lossMeter
	ex congestion.CongestionControlEx
}

func (m *lossMeter) OnCongestionEvent(number congestion.PacketNumber, lostBytes, priorInFlight congestion.ByteCount) {
	m.packets.Add(1)
	m.bytes.Add(uint64(lostBytes))
	m.CongestionControl.OnCongestionEvent(number, lostBytes, priorInFlight)
}

func (m *lossMeter) OnPacketAcked(number congestion.PacketNumber, ackedBytes, priorInFlight congestion.ByteCount, eventTime monotime.Time) {
	m.ackedPackets.Add(1)
	m.ackedBytes.Add(uint64(ackedBytes))
	m.CongestionControl.OnPacketAcked(number, ackedBytes, priorInFlight, eventTime)
}

// SetRTTStatsProvider is not passed on: the wrapped controller already has
// the connection's RTT statistics, and setting them again would write a
// field its send loop reads.
func (m *lossMeter) SetRTTStatsProvider(congestion.RTTStatsProvider) {}

func (m *lossMeterEx) OnCongestionEventEx(priorInFlight congestion.ByteCount, eventTime monotime.Time, acked []congestion.AckedPacketInfo, lost []congestion.LostPacketInfo) {
	m.ex.OnCongestionEventEx(priorInFlight, eventTime, acked, lost)
}

// meterLoss puts a lossMeter around the controller core/v2 installed on
// cl's connection and returns it; nil when the connection or its
// controller cannot be found (a quic-go or core/v2 of another shape): the
// connection then runs as it was, and its losses stay unknown.
func meterLoss(cl client.Client) *lossMeter {
	qc := quicConnOf(cl)
	if qc == nil {
		return nil
	}
	inner := installedController(qc)
	if inner == nil {
		return nil
	}
	m := &lossMeter{CongestionControl: inner}
	if ex, ok := inner.(congestion.CongestionControlEx); ok {
		qc.SetCongestionControl(&lossMeterEx{lossMeter: m, ex: ex})
	} else {
		qc.SetCongestionControl(m)
	}
	return m
}

var (
	ccType   = reflect.TypeFor[congestion.CongestionControl]()
	ccExType = reflect.TypeFor[congestion.CongestionControlEx]()
)

// installedController is the controller SetCongestionControl installed on
// qc: quic-go keeps it in its sent-packet handler's congestion field,
// inside an adapter's CC field, with no accessor. Each step checks the
// shape it expects and gives up (nil) on any other. core/v2 installs it
// before NewClient returns, on the goroutine that called it, and nothing
// else writes it.
func installedController(qc *quic.Conn) congestion.CongestionControl {
	field := func(v reflect.Value, name string) reflect.Value {
		// v is an interface or a pointer holding (a pointer to) a struct.
		for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
			if v.IsNil() {
				return reflect.Value{}
			}
			v = v.Elem()
		}
		if !v.IsValid() || v.Kind() != reflect.Struct || !v.CanAddr() {
			return reflect.Value{}
		}
		return v.FieldByName(name)
	}
	f := field(field(field(reflect.ValueOf(qc), "sentPacketHandler"), "congestion"), "CC")
	if !f.IsValid() || !f.CanAddr() || (f.Type() != ccType && f.Type() != ccExType) {
		return nil
	}
	v := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	if v.IsNil() {
		return nil
	}
	cc, _ := v.Interface().(congestion.CongestionControl)
	return cc
}
