package config

// globalTag is the tag of the controller API's GLOBAL selector, which
// lists every outbound, balancer and group: none of them may have it.
const globalTag = "GLOBAL"

// routeModes are the values of [route] mode, as Clash's modes.
var routeModes = []string{"rule", "global", "direct"}

// defaultRouteMode routes by the rules.
const defaultRouteMode = "rule"

// reservedTag records a problem when the tag at key is the GLOBAL
// selector's. The caller still records the tag, so that what names it
// adds no second problem.
func (l *lowerer) reservedTag(key, tag string) {
	if tag == globalTag {
		l.errorf(key, "the tag %q is reserved: it is the controller's GLOBAL selector, which lists every outbound, balancer and group", tag)
	}
}
