package grammar

import (
	"slices"
	"strings"
)

// formats are the supported values of "format", as patterns. They are
// exact for what they check: a date is a real calendar date (leap years
// included), a time has an hour 00-23 and a second 00-59 (leap seconds,
// which validators treat differently, are left out) and a UTC offset.
var formats = func() map[string]string {
	date := `(\d{4}-(0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|\d{4}-(0[469]|11)-(0[1-9]|[12]\d|30)|\d{4}-02-(0[1-9]|1\d|2[0-8])|(\d\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)`
	time := `([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)`
	octet := `(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`
	hex := func(n string) string { return "[0-9a-fA-F]{" + n + "}" }
	return map[string]string{
		"date":      "^" + date + "$",
		"time":      "^" + time + "$",
		"date-time": "^" + date + "[Tt]" + time + "$",
		"uuid":      "^" + strings.Join([]string{hex("8"), hex("4"), hex("4"), hex("4"), hex("12")}, "-") + "$",
		"ipv4":      "^(" + octet + `\.){3}` + octet + "$",
	}
}()

func formatNames() []string {
	var names []string
	for k := range formats {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
