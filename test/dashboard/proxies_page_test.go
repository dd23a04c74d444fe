package dashboard

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/chromedp/chromedp"
)

// What metacubexd renders on its proxies page, read from the DOM of the
// built copy under testdata: a card per group whose title is a span
// followed by its "n / m" count, the policy and the current choice below
// it, the group's latency-test button in the header, and, when the card is
// open, one role=button element per member (aria-label: the member's name,
// aria-pressed: the group's choice) holding its name and its latency.

// groupCardJS is an expression that evaluates to the card of group name,
// or null.
func groupCardJS(name string) string {
	q, _ := json.Marshal(name)
	return fmt.Sprintf(`(() => {
		const box = document.querySelector('[data-testid=proxies-scroll-container]');
		if (!box) return null;
		const title = [...box.querySelectorAll('span')].find(s => s.textContent.trim() === %s &&
			s.nextElementSibling && /^\d+\s*\/\s*\d+$/.test(s.nextElementSibling.textContent.trim()));
		return title ? title.closest('.rounded-xl') : null;
	})()`, q)
}

// latencyButtonJS is an expression that evaluates to the latency-test
// button of group name (the one with the gauge icon).
func latencyButtonJS(name string) string {
	return `[...` + groupCardJS(name) + `.querySelectorAll('button')].find(b => b.querySelector('path[d^="M5.636 19.364"]'))`
}

// groupCard is what one card shows.
type groupCard struct {
	Found   bool         `json:"found"`
	Header  string       `json:"header"` // the card's header text: name, count, policy, choice
	Members []memberCard `json:"members"`
}

type memberCard struct {
	Name     string `json:"name"`
	Latency  string `json:"latency"` // the number shown, "" when none
	Selected bool   `json:"selected"`
}

func (c groupCard) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "header %q;", c.Header)
	for _, m := range c.Members {
		fmt.Fprintf(&b, " %s(latency %q, selected %v)", m.Name, m.Latency, m.Selected)
	}
	return b.String()
}

func (c groupCard) member(name string) (memberCard, bool) {
	for _, m := range c.Members {
		if m.Name == name {
			return m, true
		}
	}
	return memberCard{}, false
}

// latencyMS is the member's latency as a number of milliseconds.
func (m memberCard) latencyMS() (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(m.Latency))
	return n, err == nil
}

func (b *browser) groupCard(name string) groupCard {
	var c groupCard
	err := b.eval(`(() => {
		const card = `+groupCardJS(name)+`;
		if (!card) return {found: false};
		const header = card.firstElementChild ? card.firstElementChild.innerText : '';
		const members = [...card.querySelectorAll('[role=button][aria-pressed]')].map(m => {
			const lat = m.querySelector('[aria-label^="Test latency"]');
			return {
				name: m.getAttribute('aria-label'),
				latency: lat ? lat.innerText.trim() : '',
				selected: m.getAttribute('aria-pressed') === 'true',
			};
		});
		return {found: true, header, members};
	})()`, &c)
	if err != nil {
		return groupCard{Header: "(" + err.Error() + ")"}
	}
	return c
}

// openGroup clicks the title of group name until its members show.
func (b *browser) openGroup(name string, members ...string) {
	b.t.Helper()
	b.waitFor("the card of group "+name, func() (bool, string) {
		c := b.groupCard(name)
		return c.Found, b.text()
	})
	if c := b.groupCard(name); len(c.Members) == 0 {
		b.do("opening group "+name, chromedp.Click(chromedp.JSPath(groupCardJS(name)+`.querySelector('span')`)))
	}
	b.waitFor("the members of group "+name, func() (bool, string) {
		c := b.groupCard(name)
		for _, m := range members {
			if _, ok := c.member(m); !ok {
				return false, c.String()
			}
		}
		return len(c.Members) == len(members), c.String()
	})
}
