"""The business of Engram: memories, their scope, their lifecycle. Pure: no I/O."""
