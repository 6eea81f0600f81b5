package store

import (
	"fmt"
	"slices"
	"time"
)

// checkQuery checks a query and returns its limit with 0 turned into
// MaxPageSize; matchable is false when a condition can meet no entity.
func checkQuery(q Query) (limit int, matchable bool, err error) {
	if err := ValidateKey(q.PartitionKey); err != nil {
		return 0, false, fmt.Errorf("partition key: %w", err)
	}
	if err := checkRange("rows", q.Rows); err != nil {
		return 0, false, err
	}
	if r := q.Resume; r != nil {
		if r.PartitionKey != q.PartitionKey {
			return 0, false, fmt.Errorf("%w: cursor of partition %q resumes a query of %q",
				ErrInvalidQuery, r.PartitionKey, q.PartitionKey)
		}
		if err := checkBound("cursor row key", r.RowKey); err != nil {
			return 0, false, err
		}
	}
	return checkPage(q.Limit, q.Where)
}

// checkScan checks a scan as checkQuery checks a query.
func checkScan(s Scan) (limit int, matchable bool, err error) {
	if err := checkRange("partitions", s.Partitions); err != nil {
		return 0, false, err
	}
	if r := s.Resume; r != nil {
		if err := ValidateKey(r.PartitionKey); err != nil {
			return 0, false, fmt.Errorf("%w: cursor partition key: %w", ErrInvalidQuery, err)
		}
		if err := checkBound("cursor row key", r.RowKey); err != nil {
			return 0, false, err
		}
	}
	if err := checkSelect(s.Select, s.Where); err != nil {
		return 0, false, err
	}
	return checkPage(s.Limit, s.Where)
}

// checkSelect checks a scan's selection: property names, and every
// condition's property among them, since an unread property meets nothing.
func checkSelect(sel []string, where []Equal) error {
	if sel == nil {
		return nil
	}
	for _, name := range sel {
		if reservedProperties[name] || !validPropertyName(name) {
			return fmt.Errorf("%w: select %q is not a property name", ErrInvalidQuery, name)
		}
	}
	for _, c := range where {
		if !slices.Contains(sel, c.Property) {
			return fmt.Errorf("%w: condition on %q, which the scan does not select", ErrInvalidQuery, c.Property)
		}
	}
	return nil
}

func checkPage(limit int, where []Equal) (int, bool, error) {
	limit, err := PageLimit(limit)
	if err != nil {
		return 0, false, err
	}
	matchable := true
	for _, c := range where {
		ok, err := checkCondition(c)
		if err != nil {
			return 0, false, err
		}
		matchable = matchable && ok
	}
	return limit, matchable, nil
}

// checkRange checks the bounds of a key range: each is empty, the open
// bound, or a valid key. A bound no key can equal would reach a service as
// a literal it may refuse.
func checkRange(what string, r Range) error {
	if err := checkBound(what+" from", r.From); err != nil {
		return err
	}
	return checkBound(what+" to", r.To)
}

func checkBound(what, bound string) error {
	if bound == "" {
		return nil
	}
	if err := ValidateKey(bound); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidQuery, what, err)
	}
	return nil
}

// checkCondition refuses a condition that names no property an entity can
// have or holds a value of a type the contract does not store: those are
// mistakes of the caller. A value of a stored type that no entity can hold
// (a NaN, a string over the limit, a time outside the Edm range or finer
// than the 100 ns ticks times are stored in) is a valid condition that
// meets nothing: ok is false.
func checkCondition(c Equal) (ok bool, err error) {
	if reservedProperties[c.Property] || !validPropertyName(c.Property) {
		return false, fmt.Errorf("%w: condition on %q, which is not a property name", ErrInvalidQuery, c.Property)
	}
	switch v := c.Value.(type) {
	case string, bool, int32, int64, float64, []byte:
	case time.Time:
		if !v.Equal(TruncateToTicks(v)) {
			return false, nil
		}
	default:
		return false, fmt.Errorf("%w: condition on %s holds unsupported type %T", ErrInvalidQuery, c.Property, c.Value)
	}
	_, err = validateProperty(c.Property, c.Value)
	return err == nil, nil
}

// checkMode refuses a write mode that is neither Merge nor Replace, which
// engines would otherwise read differently.
func checkMode(mode WriteMode) error {
	if mode != Merge && mode != Replace {
		return fmt.Errorf("%w: write mode %d is neither Merge nor Replace", ErrInvalidBatch, mode)
	}
	return nil
}
