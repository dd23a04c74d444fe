package api

import (
	"encoding/json"
	"errors"

	"switchyard/plane"
)

// modeList is what GET /configs reports as "mode-list".
var modeList = plane.Modes[:]

// parseMode reads the "mode" of a PATCH /configs: a string naming one of
// the modes, whatever its case. The error is the message a 400 carries.
func parseMode(v json.RawMessage) (plane.Mode, error) {
	var str string
	if json.Unmarshal(v, &str) != nil {
		return 0, errors.New("mode must be a string")
	}
	m, err := plane.ParseMode(str)
	if err != nil {
		return 0, errors.New("mode " + str + " is not one of rule, global, direct")
	}
	return m, nil
}
