-- plain_gate.lua - test_gate.lua under a plain lua5.4 that loads the module (no host
-- program: agent:run drives the loop itself), so the gate is checked in both drivers.
require "test_gate"
