package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseLevels parses the string form of delay levels: durations separated by
// white space, each a positive integer followed by one unit out of s, m, h, d
// ("1s 5s 10s 30s 1m 2h 1d"), at most 65536 of them. Level L is the L-th
// duration. Anything else is ErrInvalid.
func ParseLevels(s string) ([]time.Duration, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("levels %q: no level: %w", s, ErrInvalid)
	}
	if len(fields) > maxProgressLevels {
		return nil, fmt.Errorf("levels: %d levels, at most %d: %w", len(fields), maxProgressLevels, ErrInvalid)
	}
	out := make([]time.Duration, 0, len(fields))
	for i, f := range fields {
		d, err := parseLevel(f)
		if err != nil {
			return nil, fmt.Errorf("levels %q: level %d %q: %v: %w", s, i+1, f, err, ErrInvalid)
		}
		out = append(out, d)
	}
	return out, nil
}

// maxLevelValue keeps n*unit far away from overflowing time.Duration.
const maxLevelValue = 100 * 365 // 100 years in days

func parseLevel(f string) (time.Duration, error) {
	if len(f) < 2 {
		return 0, fmt.Errorf("want a number and a unit")
	}
	var unit time.Duration
	switch f[len(f)-1] {
	case 's':
		unit = time.Second
	case 'm':
		unit = time.Minute
	case 'h':
		unit = time.Hour
	case 'd':
		unit = 24 * time.Hour
	default:
		return 0, fmt.Errorf("unit must be s, m, h or d")
	}
	digits := f[:len(f)-1]
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("want a positive integer before the unit")
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 1 || n > maxLevelValue*int64(24*time.Hour/unit) {
		return 0, fmt.Errorf("want a positive integer of at most 100 years")
	}
	return time.Duration(n) * unit, nil
}
