package store

import (
	"context"
	"iter"
	"maps"
	"slices"
	"time"
)

// Walker is implemented by tables that hand a scan's rows to their reader
// one property at a time, where Scan builds a Properties map per row and
// an interface per value: a reader that turns many rows into its own type
// (the fleet at a moment turns ten thousand index rows a minute into
// images) then pays neither. The embedded store's tables implement it;
// Walk, below, serves every table.
type Walker interface {
	// Walk reads the rows Scan would read for s, which has no Where and no
	// Select, calling row with each one's keys and properties, and returns
	// the cursor after the last row it read (nil when none remain).
	Walk(ctx context.Context, s Scan, row RowFunc) (*Cursor, error)
}

// RowFunc is given each row of a Walk: its keys, and its properties as a
// sequence of names and values, in name order, to be read at most once
// and only before RowFunc returns. A value that cannot be read ends the
// sequence early and fails the Walk. An error RowFunc returns ends the
// Walk with that error.
type RowFunc func(partitionKey, rowKey string, props iter.Seq2[string, Value]) error

// Walk reads one page of a scan as Walker.Walk does, with the table's own
// Walk where it has one and by Scan where it has not, or where s filters
// or selects.
func Walk(ctx context.Context, t Table, s Scan, row RowFunc) (*Cursor, error) {
	if w, ok := t.(Walker); ok && s.Where == nil && s.Select == nil {
		return w.Walk(ctx, s, row)
	}
	page, err := t.Scan(ctx, s)
	if err != nil {
		return nil, err
	}
	for _, e := range page.Entities {
		if err := row(e.PartitionKey, e.RowKey, PropertiesOf(e.Properties)); err != nil {
			return nil, err
		}
	}
	return page.Next, nil
}

// PropertiesOf is a Properties map as the sequence a Walk hands over: in
// name order, each value as ValueOf gives it.
func PropertiesOf(props Properties) iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if !yield(name, ValueOf(props[name])) {
				return
			}
		}
	}
}

// A Kind is the type of a property's value, one per type of the contract.
type Kind uint8

// The kinds of Value: Kind's zero is no value.
const (
	KindString Kind = iota + 1
	KindBool
	KindInt32
	KindInt64
	KindDouble
	KindDateTime
	KindBinary
)

// Value is a property's value without an interface around it: Kind names
// its type and the field that holds it.
type Value struct {
	Kind Kind
	// Str holds a KindString.
	Str string
	// Int holds a KindInt32 or a KindInt64; a KindBool is 1 for true.
	Int int64
	// Float holds a KindDouble.
	Float float64
	// Time holds a KindDateTime.
	Time time.Time
	// Bytes holds a KindBinary. In a Walk it is the engine's buffer, valid
	// only until the RowFunc returns: copy what is kept.
	Bytes []byte
}

// ValueOf is the Value of a property value of the contract's types; a
// value of any other type is the zero Value.
func ValueOf(v any) Value {
	switch v := v.(type) {
	case string:
		return Value{Kind: KindString, Str: v}
	case bool:
		if v {
			return Value{Kind: KindBool, Int: 1}
		}
		return Value{Kind: KindBool}
	case int32:
		return Value{Kind: KindInt32, Int: int64(v)}
	case int64:
		return Value{Kind: KindInt64, Int: v}
	case float64:
		return Value{Kind: KindDouble, Float: v}
	case time.Time:
		return Value{Kind: KindDateTime, Time: v}
	case []byte:
		return Value{Kind: KindBinary, Bytes: v}
	}
	return Value{}
}

// Any is v as a Properties map holds it (nil for the zero Value). A
// KindBinary's bytes are not copied.
func (v Value) Any() any {
	switch v.Kind {
	case KindString:
		return v.Str
	case KindBool:
		return v.Int != 0
	case KindInt32:
		return int32(v.Int)
	case KindInt64:
		return v.Int
	case KindDouble:
		return v.Float
	case KindDateTime:
		return v.Time
	case KindBinary:
		return v.Bytes
	}
	return nil
}
