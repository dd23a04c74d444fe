package health

// Settle waits until e has no outstanding work: timer events handled, and
// every pass and probe they started finished. Only meaningful on a
// started engine whose clock no one else advances.
func Settle(e *Engine) { e.run.busy.wait() }

// CooldownAfter exposes the cooldown step of the n-th probe failure.
var CooldownAfter = cooldownAfter

// WatchNetworkIn is WatchNetwork in namespace ns with a debounce of d;
// ready is called once it is subscribed.
var WatchNetworkIn = watchNetwork
