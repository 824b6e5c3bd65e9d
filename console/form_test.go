package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// TestSettingsFieldsFromAChangedSchema: a range and help changed in a copy
// of the schema show up in the form's inputs and in its own "not a
// number" message; nothing about a setting is written in the console.
func TestSettingsFieldsFromAChangedSchema(t *testing.T) {
	schema := vdibroker.PoolFields()
	for i := range schema {
		if schema[i].Path == "maxSessionLimit" {
			schema[i].Min, schema[i].Max, schema[i].Help, schema[i].Label = 2, 500, "test help", "Test label"
		}
	}
	var got *settingsField
	fields := settingsFields(schema, vdibroker.Pooled, "")
	for i := range fields {
		if fields[i].Path == "maxSessionLimit" {
			got = &fields[i]
		}
	}
	if got == nil {
		t.Fatal("no maxSessionLimit input")
	}
	if got.MinAttr != "2" || got.MaxAttr != "500" || got.Step != "1" || got.Input != "number" ||
		got.Label != "Test label" || got.Hint != "2..500 · test help" {
		t.Errorf("input %+v, want min 2, max 500, step 1, the test label and hint", got)
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(url.Values{"maxSessionLimit": {"ten"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	form, _ := parseSettings(r, fields)
	if want := "maxSessionLimit: must be a whole number, allowed 2..500"; form.Errors["maxSessionLimit"] != want {
		t.Errorf("error %q, want %q", form.Errors["maxSessionLimit"], want)
	}
}

// TestSettingsGroups: every setting of the schema is in one of the form's
// sections, in their order; a DepthFirst pool's form has no load index
// section and a Pooled pool's no personal one.
func TestSettingsGroups(t *testing.T) {
	for _, f := range vdibroker.PoolFields() {
		if !slices.Contains(groupOrder, f.Group) {
			t.Errorf("%s: group %q is not one of the form's sections %v", f.Path, f.Group, groupOrder)
		}
	}
	var names []string
	for _, g := range groupFields(settingsFields(vdibroker.PoolFields(), vdibroker.Pooled, vdibroker.DepthFirst)) {
		names = append(names, g.Name)
	}
	if want := []string{vdibroker.GroupCapacity, vdibroker.GroupTimeouts, vdibroker.GroupPower, vdibroker.GroupGateway, vdibroker.GroupGeneral}; !slices.Equal(names, want) {
		t.Errorf("DepthFirst sections %v, want %v", names, want)
	}
	names = nil
	for _, g := range groupFields(settingsFields(vdibroker.PoolFields(), vdibroker.Pooled, vdibroker.LoadIndex)) {
		names = append(names, g.Name)
	}
	if want := []string{vdibroker.GroupCapacity, vdibroker.GroupLoadIndex, vdibroker.GroupTimeouts, vdibroker.GroupPower, vdibroker.GroupGateway, vdibroker.GroupGeneral}; !slices.Equal(names, want) {
		t.Errorf("LoadIndex sections %v, want %v", names, want)
	}
}
