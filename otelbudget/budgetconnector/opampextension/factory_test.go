package opampextension_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension"
)

func TestNewFactory(t *testing.T) {
	assert.Equal(t, budgetconnector.ExtensionType, opampextension.NewFactory().Type().String())
}
