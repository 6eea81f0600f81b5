package pebble

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/metadatad/metadatad/store"
)

// A stored value is a version byte, the ETag (uvarint length, bytes), the
// write time (varint Unix nanoseconds), then the properties in the layout
// the version names:
//   - valueJSON: EDM JSON, Azure's own entity encoding. Written until the
//     binary layout replaced it and still read, so a store written then
//     opens as it was; its rows change layout only when written again.
//   - valueBinary: a uvarint count, then per property in name order its
//     name (uvarint length, bytes), a type tag and the value. Several times
//     cheaper to write and read than JSON, and typed as the Table contract
//     is: each of its seven types has its own tag, so an int32 never reads
//     back as an int64 nor a whole double as an integer.
const (
	valueJSON   = 1
	valueBinary = 2
)

// Type tags of valueBinary, one per property type of the contract.
const (
	tagString   = 1 // uvarint length, UTF-8 bytes
	tagFalse    = 2 // no payload
	tagTrue     = 3 // no payload
	tagInt32    = 4 // zig-zag varint
	tagInt64    = 5 // zig-zag varint
	tagDouble   = 6 // 8 bytes, IEEE 754 bits little-endian, so every bit survives
	tagDateTime = 7 // uvarint .NET ticks: the 100 ns precision Azure keeps
	tagBinary   = 8 // uvarint length, bytes
)

// encodeValue lays out a stored entity in the current layout.
func encodeValue(e store.Entity) ([]byte, error) {
	names := make([]string, 0, len(e.Properties))
	size := 1 + 2*binary.MaxVarintLen64 + len(e.ETag)
	for name, v := range e.Properties {
		names = append(names, name)
		size += binary.MaxVarintLen64 + len(name) + 1 + binary.MaxVarintLen64
		switch v := v.(type) {
		case string:
			size += len(v)
		case []byte:
			size += len(v)
		}
	}
	slices.Sort(names)
	buf := make([]byte, 0, size)
	buf = append(buf, valueBinary)
	buf = binary.AppendUvarint(buf, uint64(len(e.ETag)))
	buf = append(buf, e.ETag...)
	buf = binary.AppendVarint(buf, e.Timestamp.UnixNano())
	buf = binary.AppendUvarint(buf, uint64(len(names)))
	for _, name := range names {
		buf = binary.AppendUvarint(buf, uint64(len(name)))
		buf = append(buf, name...)
		switch v := e.Properties[name].(type) {
		case string:
			buf = append(buf, tagString)
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
		case bool:
			if v {
				buf = append(buf, tagTrue)
			} else {
				buf = append(buf, tagFalse)
			}
		case int32:
			buf = binary.AppendVarint(append(buf, tagInt32), int64(v))
		case int64:
			buf = binary.AppendVarint(append(buf, tagInt64), v)
		case float64:
			buf = binary.LittleEndian.AppendUint64(append(buf, tagDouble), math.Float64bits(v))
		case time.Time:
			ticks := store.Ticks(v)
			if ticks < 0 || ticks > store.MaxTicks {
				return nil, fmt.Errorf("%w: property %s: time %s outside 0001 to 9999", store.ErrInvalidEntity, name, v.Format(time.RFC3339Nano))
			}
			buf = binary.AppendUvarint(append(buf, tagDateTime), uint64(ticks))
		case []byte:
			buf = append(buf, tagBinary)
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
		default:
			return nil, fmt.Errorf("%w: property %s has unsupported type %T", store.ErrInvalidEntity, name, v)
		}
	}
	return buf, nil
}

// decodeValue reads a stored value of any layout this build knows.
func decodeValue(partitionKey, rowKey string, value []byte) (store.Entity, error) {
	return decodeSelected(partitionKey, rowKey, value, nil)
}

// decodeSelected reads a stored value with only the selected properties
// (store.Scan.Select; nil selects all). With none selected it reads the
// header alone, ETag and write time, and leaves the properties unread.
func decodeSelected(partitionKey, rowKey string, value []byte, sel []string) (store.Entity, error) {
	if len(value) == 0 {
		return store.Entity{}, fmt.Errorf("%w: empty value", errCorrupt)
	}
	version, rest := value[0], value[1:]
	if version != valueBinary && version != valueJSON {
		return store.Entity{}, fmt.Errorf("%w: unknown value version %d", errCorrupt, version)
	}
	r := reader{rest: rest}
	if version == valueBinary && (sel == nil || len(sel) > 0) {
		// The ETag, names and string values are then slices of one string
		// of the whole value: one allocation for all of them.
		r.whole = string(rest)
	}
	etag := r.text(r.bytes("etag"))
	nanos := r.varint("timestamp")
	if r.err != nil {
		return store.Entity{}, r.err
	}
	var props store.Properties
	var err error
	switch {
	case sel != nil && len(sel) == 0:
	case version == valueJSON:
		props, err = store.UnmarshalEDM(r.rest)
	default:
		props, err = r.properties()
	}
	if err != nil {
		return store.Entity{}, err
	}
	if len(sel) > 0 {
		for name := range props {
			if !slices.Contains(sel, name) {
				delete(props, name)
			}
		}
	}
	return store.Entity{
		PartitionKey: partitionKey,
		RowKey:       rowKey,
		Properties:   props,
		ETag:         etag,
		Timestamp:    time.Unix(0, nanos).UTC(),
	}, nil
}

// walkValue hands a stored value's properties to yield, as decodeSelected
// reads them with all selected, without building their map; it returns
// why they did not read whole. A value of the JSON layout, rare and old,
// is read into its map first.
func walkValue(value []byte, yield func(string, store.Value) bool) error {
	if len(value) == 0 {
		return fmt.Errorf("%w: empty value", errCorrupt)
	}
	version, rest := value[0], value[1:]
	r := reader{rest: rest}
	switch version {
	case valueBinary:
		// The names and strings are slices of one string of the value.
		r.whole = string(rest)
		r.bytes("etag")
		r.varint("timestamp")
		if r.err == nil {
			r.each(yield)
		}
		return r.err
	case valueJSON:
		r.bytes("etag")
		r.varint("timestamp")
		if r.err != nil {
			return r.err
		}
		props, err := store.UnmarshalEDM(r.rest)
		if err != nil {
			return err
		}
		store.PropertiesOf(props)(yield)
		return nil
	}
	return fmt.Errorf("%w: unknown value version %d", errCorrupt, version)
}

// reader walks a value, remembering the first error.
type reader struct {
	rest []byte
	err  error
	// whole, when set, holds the bytes rest started with, as a string that
	// text slices instead of allocating.
	whole string
	// count is the number of properties each read, once it has.
	count int
}

// text is b, just read from r.rest, as a string: a slice of r.whole when
// it is set.
func (r *reader) text(b []byte) string {
	if r.whole == "" {
		return string(b)
	}
	end := len(r.whole) - len(r.rest)
	return r.whole[end-len(b) : end]
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errCorrupt, what)
	}
	r.rest = nil
}

func (r *reader) uvarint(what string) uint64 {
	n, k := binary.Uvarint(r.rest)
	if k <= 0 {
		r.fail(what)
		return 0
	}
	r.rest = r.rest[k:]
	return n
}

func (r *reader) varint(what string) int64 {
	n, k := binary.Varint(r.rest)
	if k <= 0 {
		r.fail(what)
		return 0
	}
	r.rest = r.rest[k:]
	return n
}

// bytes reads a uvarint length and that many bytes.
func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil || n > uint64(len(r.rest)) {
		r.fail(what)
		return nil
	}
	b := r.rest[:n:n]
	r.rest = r.rest[n:]
	return b
}

// properties reads valueBinary properties into a map.
func (r *reader) properties() (store.Properties, error) {
	var props store.Properties
	r.each(func(name string, v store.Value) bool {
		if props == nil {
			props = make(store.Properties, r.count)
		}
		if v.Kind == store.KindBinary {
			v.Bytes = bytesCopy(v.Bytes)
		}
		props[name] = v.Any()
		return true
	})
	if r.err != nil {
		return nil, r.err
	}
	if props == nil {
		props = store.Properties{}
	}
	return props, nil
}

// each reads valueBinary properties in their stored order, names ascending
// (encodeValue's), handing each to yield until it returns false; r.err
// then tells whether what it read was whole. Names and string values are
// r.text's; a binary value is the engine's buffer, not a copy.
func (r *reader) each(yield func(string, store.Value) bool) {
	count := r.uvarint("property count")
	if r.err != nil || count > uint64(len(r.rest))/2 {
		r.fail("property count")
		return
	}
	r.count = int(count)
	var prev string
	for i := range count {
		name := r.text(r.bytes("property name"))
		if r.err != nil {
			return
		}
		if i > 0 && name <= prev {
			r.fail("property " + name + " repeated or out of order")
			return
		}
		prev = name
		if len(r.rest) == 0 {
			r.fail("property type of " + name)
			return
		}
		tag := r.rest[0]
		r.rest = r.rest[1:]
		var v store.Value
		switch tag {
		case tagString:
			v = store.Value{Kind: store.KindString, Str: r.text(r.bytes(name))}
		case tagFalse:
			v = store.Value{Kind: store.KindBool}
		case tagTrue:
			v = store.Value{Kind: store.KindBool, Int: 1}
		case tagInt32:
			n := r.varint(name)
			if n < math.MinInt32 || n > math.MaxInt32 {
				r.fail(name + " is out of Int32 range")
			}
			v = store.Value{Kind: store.KindInt32, Int: n}
		case tagInt64:
			v = store.Value{Kind: store.KindInt64, Int: r.varint(name)}
		case tagDouble:
			if len(r.rest) < 8 {
				r.fail(name)
				break
			}
			v = store.Value{Kind: store.KindDouble, Float: math.Float64frombits(binary.LittleEndian.Uint64(r.rest))}
			r.rest = r.rest[8:]
		case tagDateTime:
			ticks := r.uvarint(name)
			if ticks > uint64(store.MaxTicks) {
				r.fail(name + " is past 9999")
			}
			v = store.Value{Kind: store.KindDateTime, Time: store.TimeFromTicks(int64(ticks))}
		case tagBinary:
			v = store.Value{Kind: store.KindBinary, Bytes: r.bytes(name)}
		default:
			r.fail(fmt.Sprintf("property %s has unknown type %d", name, tag))
		}
		if r.err != nil || !yield(name, v) {
			return
		}
	}
	if len(r.rest) != 0 {
		r.fail("bytes after the properties")
	}
}

// bytesCopy copies a binary value out of the engine's buffer, which is only
// valid until the next read; never nil, so an empty value stays present.
func bytesCopy(b []byte) []byte { return append([]byte{}, b...) }
