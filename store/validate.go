package store

import (
	"bytes"
	"fmt"
	"math"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// reservedProperties are the system properties every entity has.
var reservedProperties = map[string]bool{"PartitionKey": true, "RowKey": true, "Timestamp": true, "ETag": true}

// Edm DateTime values span what Azure Table Storage accepts.
var (
	minDateTime = time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDateTime = time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)
)

// ValidateTableName checks the table name rules: 3 to 63 ASCII letters and
// digits, starting with a letter.
func ValidateTableName(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("%w: table name %q must be 3 to 63 characters", ErrInvalidKey, name)
	}
	for i, r := range name {
		letter := r < utf8.RuneSelf && unicode.IsLetter(r)
		if !letter && (i == 0 || r < '0' || r > '9') {
			return fmt.Errorf("%w: table name %q must be letters and digits, starting with a letter", ErrInvalidKey, name)
		}
	}
	return nil
}

// ValidateKey checks the partition and row key rules: valid UTF-8 without
// / \ # ? or control characters, 1 to MaxKeyBytes long as UTF-16.
func ValidateKey(key string) error {
	_, err := keyUnits(key)
	return err
}

// keyUnits is ValidateKey that also returns the key's length in UTF-16
// units, found in the same pass over the key, for the entity's size: a
// create's keys are read once, not once per rule and again for the size.
// The rules are reported in the order they always were.
func keyUnits(key string) (int, error) {
	if key == "" {
		return 0, fmt.Errorf("%w: key is empty", ErrInvalidKey)
	}
	units, valid := 0, true
	forbidden := rune(-1)
	for i := 0; i < len(key); {
		r, size := rune(key[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(key[i:])
			valid = valid && !(r == utf8.RuneError && size == 1)
		}
		units += utf16.RuneLen(r)
		if forbidden < 0 && forbiddenInKey(r) {
			forbidden = r
		}
		i += size
	}
	switch {
	case !valid:
		return 0, fmt.Errorf("%w: key is not valid UTF-8", ErrInvalidKey)
	case 2*units > MaxKeyBytes:
		return 0, fmt.Errorf("%w: key is %d bytes as UTF-16, over %d", ErrInvalidKey, 2*units, MaxKeyBytes)
	case forbidden >= 0:
		return 0, fmt.Errorf("%w: key holds forbidden character %q", ErrInvalidKey, forbidden)
	}
	return units, nil
}

func forbiddenInKey(r rune) bool {
	return r == '/' || r == '\\' || r == '#' || r == '?' || unicode.IsControl(r)
}

// ValidateEntity checks an entity's keys and properties against the limits.
// Errors other than key errors are *PropertyError.
func ValidateEntity(e Entity) error {
	_, err := checkEntity(e)
	return err
}

// checkEntity is ValidateEntity in one pass over the entity, returning its
// EntitySize, which the pass measures on the way: each key, name and
// string is read once, where checking the rules and then measuring the
// entity read each twice or more (and a batch's size check a third time).
func checkEntity(e Entity) (int, error) {
	size, err := addressSize(e.PartitionKey, e.RowKey)
	if err != nil {
		return 0, err
	}
	if len(e.Properties) > MaxProperties {
		return 0, &PropertyError{Err: fmt.Errorf("%w: %d properties, over %d", ErrTooLarge, len(e.Properties), MaxProperties)}
	}
	for name, v := range e.Properties {
		n, err := validateProperty(name, v)
		if err != nil {
			return 0, &PropertyError{Property: name, Err: err}
		}
		size += n
	}
	if size > MaxEntityBytes {
		return 0, &PropertyError{Err: fmt.Errorf("%w: entity is %d bytes, over %d", ErrTooLarge, size, MaxEntityBytes)}
	}
	return size, nil
}

// validateProperty checks one property and returns its share of
// EntitySize.
func validateProperty(name string, v any) (int, error) {
	if reservedProperties[name] {
		return 0, fmt.Errorf("%w: %s is a system property", ErrInvalidEntity, name)
	}
	nameUnits, ok := propertyNameUnits(name)
	if !ok {
		return 0, fmt.Errorf("%w: name must be an identifier of at most 255 characters", ErrInvalidEntity)
	}
	n, err := validateValue(v)
	if err != nil {
		return 0, err
	}
	return 8 + 2*nameUnits + n, nil
}

// validateValue checks a property value and returns its valueSize; a
// string is measured in the pass that checks its encoding.
func validateValue(v any) (int, error) {
	switch v := v.(type) {
	case string:
		units, valid := stringUnits(v)
		if n := 2 * units; n > MaxValueBytes {
			return 0, fmt.Errorf("%w: string is %d bytes as UTF-16, over %d", ErrTooLarge, n, MaxValueBytes)
		}
		if !valid {
			return 0, fmt.Errorf("%w: string is not valid UTF-8", ErrInvalidEntity)
		}
		return 4 + 2*units, nil
	case []byte:
		if len(v) > MaxValueBytes {
			return 0, fmt.Errorf("%w: binary is %d bytes, over %d", ErrTooLarge, len(v), MaxValueBytes)
		}
	case time.Time:
		if v.Before(minDateTime) || v.After(maxDateTime) {
			return 0, fmt.Errorf("%w: time %s outside 1601-01-01 to 9999-12-31", ErrInvalidEntity, v.Format(time.RFC3339Nano))
		}
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%w: NaN and infinities are not stored", ErrInvalidEntity)
		}
	case bool, int32, int64:
	default:
		return 0, fmt.Errorf("%w: unsupported type %T", ErrInvalidEntity, v)
	}
	return valueSize(v), nil
}

func validPropertyName(name string) bool {
	_, ok := propertyNameUnits(name)
	return ok
}

// propertyNameUnits is the length in UTF-16 units of a valid property
// name; ok is false for a name that is not one.
func propertyNameUnits(name string) (units int, ok bool) {
	if name == "" || len(name) > 255 {
		return 0, false
	}
	for i, r := range name {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
			return 0, false
		}
		units += utf16.RuneLen(r)
	}
	return units, true
}

// EntitySize is an entity's size as Azure Table Storage counts it against
// MaxEntityBytes.
func EntitySize(e Entity) int {
	n := 4 + 2*utf16Len(e.PartitionKey) + 2*utf16Len(e.RowKey)
	for name, v := range e.Properties {
		n += 8 + 2*utf16Len(name) + valueSize(v)
	}
	return n
}

// utf16Len is the length of s in UTF-16 code units, the unit Azure counts in.
func utf16Len(s string) int {
	n, _ := stringUnits(s)
	return n
}

// stringUnits is utf16Len and utf8.ValidString in one pass over s. Each
// byte of invalid UTF-8 counts one unit, as ranging over it does.
func stringUnits(s string) (units int, valid bool) {
	valid = true
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			units++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		valid = valid && !(r == utf8.RuneError && size == 1)
		units += utf16.RuneLen(r)
		i += size
	}
	return units, valid
}

func valueSize(v any) int {
	switch v := v.(type) {
	case string:
		return 4 + 2*utf16Len(v)
	case []byte:
		return 4 + len(v)
	case bool:
		return 1
	case int32:
		return 4
	default:
		return 8
	}
}

// ValidateBatch checks the batch rules and every operation's entity. Errors
// about one operation are *BatchError.
func ValidateBatch(ops []Op) error {
	if len(ops) > MaxBatchOps {
		return fmt.Errorf("%w: %d operations, over %d", ErrInvalidBatch, len(ops), MaxBatchOps)
	}
	if err := validateOpsIn(nil, ops); err != nil {
		return err
	}
	for i, op := range ops {
		if op.Entity.PartitionKey != ops[0].Entity.PartitionKey {
			return &BatchError{Index: i, Err: fmt.Errorf("%w: operations span partitions %q and %q",
				ErrInvalidBatch, ops[0].Entity.PartitionKey, op.Entity.PartitionKey)}
		}
	}
	return nil
}

// ValidateTransaction checks the rules of Transactor.Transact.
func ValidateTransaction(ops []TableOp) error {
	if len(ops) > MaxBatchOps {
		return fmt.Errorf("%w: %d operations, over %d", ErrInvalidBatch, len(ops), MaxBatchOps)
	}
	plain := make([]Op, len(ops))
	names := make([]string, len(ops))
	for i, op := range ops {
		plain[i], names[i] = op.Op, op.Table.Name()
	}
	return validateOpsIn(names, plain)
}

// validateOpsIn checks each operation and that no row appears twice; tables,
// when given, tell rows of different tables apart.
func validateOpsIn(tables []string, ops []Op) error {
	seen := make(map[[3]string]bool, len(ops))
	size := 0
	for i, op := range ops {
		var n int
		var err error
		switch op.Kind {
		case OpDelete:
			if err = ValidateAddress(op.Entity.PartitionKey, op.Entity.RowKey); err == nil {
				n = EntitySize(op.Entity)
			}
		case OpInsert:
			n, err = checkEntity(op.Entity)
		case OpUpsert, OpUpdate:
			if err = checkMode(op.Mode); err == nil {
				n, err = checkEntity(op.Entity)
			}
		default:
			err = fmt.Errorf("%w: unknown operation kind %d", ErrInvalidBatch, op.Kind)
		}
		if err != nil {
			return &BatchError{Index: i, Err: err}
		}
		key := [3]string{"", op.Entity.PartitionKey, op.Entity.RowKey}
		if tables != nil {
			key[0] = tables[i]
		}
		if seen[key] {
			return &BatchError{Index: i, Err: fmt.Errorf("%w: row %q/%q appears twice", ErrInvalidBatch, key[1], key[2])}
		}
		seen[key] = true
		size += n
	}
	if size > MaxBatchBytes {
		return fmt.Errorf("%w: batch is %d bytes, over %d", ErrTooLarge, size, MaxBatchBytes)
	}
	return nil
}

// ValidateAddress checks the keys that address one entity.
func ValidateAddress(partitionKey, rowKey string) error {
	_, err := addressSize(partitionKey, rowKey)
	return err
}

// addressSize is ValidateAddress that also returns the keys' share of
// EntitySize.
func addressSize(partitionKey, rowKey string) (int, error) {
	pk, err := keyUnits(partitionKey)
	if err != nil {
		return 0, fmt.Errorf("partition key: %w", err)
	}
	rk, err := keyUnits(rowKey)
	if err != nil {
		return 0, fmt.Errorf("row key: %w", err)
	}
	return 4 + 2*pk + 2*rk, nil
}

// PageLimit checks a page limit and returns it with 0 turned into MaxPageSize.
func PageLimit(limit int) (int, error) {
	if limit < 0 || limit > MaxPageSize {
		return 0, fmt.Errorf("%w: page limit %d outside 0 to %d", ErrInvalidQuery, limit, MaxPageSize)
	}
	if limit == 0 {
		return MaxPageSize, nil
	}
	return limit, nil
}

// Matches reports whether props meet every condition, for backends that
// filter in process.
func Matches(props Properties, where []Equal) bool {
	for _, c := range where {
		v, ok := props[c.Property]
		if !ok || !EqualValues(v, c.Value) {
			return false
		}
	}
	return true
}

// EqualValues reports whether two property values have the same type and value.
func EqualValues(a, b any) bool {
	switch a := a.(type) {
	case time.Time:
		b, ok := b.(time.Time)
		return ok && a.Equal(b)
	case []byte:
		b, ok := b.([]byte)
		return ok && bytes.Equal(a, b)
	default:
		return a == b
	}
}

// EqualProperties reports whether two property sets hold the same names,
// types and values.
func EqualProperties(a, b Properties) bool {
	if len(a) != len(b) {
		return false
	}
	for name, v := range a {
		w, ok := b[name]
		if !ok || !EqualValues(v, w) {
			return false
		}
	}
	return true
}
