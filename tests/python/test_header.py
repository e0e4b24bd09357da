"""The binding's copy of the ABI (python/rcoll/_abi.py) against include/rcoll.h."""
import ctypes
import os
import re
import unittest

from rcoll import _abi

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "include", "rcoll.h")


def header_text():
    with open(HEADER) as f:
        return f.read()


def enum_body(text, typedef):
    m = re.search(r"typedef enum \{([^{}]*)\}\s*%s;" % typedef, text, re.S)
    assert m, "no enum %s in rcoll.h" % typedef
    return dict((k, int(v, 0))
                for k, v in re.findall(r"(rcoll\w+)\s*=\s*(-?(?:0x[0-9a-fA-F]+|\d+))", m.group(1)))


class HeaderAgrees(unittest.TestCase):
    def setUp(self):
        self.text = header_text()

    def define(self, name):
        m = re.search(r"#define\s+%s\s+(\S+)" % name, self.text)
        self.assertIsNotNone(m, "#define %s missing from rcoll.h" % name)
        return int(m.group(1).rstrip("u"), 0)

    def test_version(self):
        v = tuple(self.define(n) for n in ("RCOLL_MAJOR", "RCOLL_MINOR", "RCOLL_PATCH"))
        self.assertEqual(v, _abi.VERSION)

    def test_results(self):
        got = dict((k, int(v)) for k, v in re.findall(r"X\((rcoll\w+),\s*(\d+),", self.text))
        self.assertEqual(got, _abi.RESULTS)
        self.assertEqual(enum_body(self.text, "rcollResult_t")["rcollNumResults"], _abi.NUM_RESULTS)

    def test_types(self):
        got = enum_body(self.text, "rcollDataType_t")
        self.assertEqual(got.pop("rcollNumTypes"), _abi.NUM_TYPES)
        self.assertEqual(got, dict(_abi.DATATYPES, **_abi.DATATYPE_ALIASES))

    def test_ops(self):
        got = enum_body(self.text, "rcollRedOp_t")
        self.assertEqual(got.pop("rcollNumOps"), _abi.NUM_OPS)
        self.assertEqual(got.pop("rcollMaxRedOp"), _abi.MAX_REDOP)
        self.assertEqual(got, _abi.REDOPS)

    def test_sizes(self):
        self.assertEqual(self.define("RCOLL_UNIQUE_ID_BYTES"), _abi.UNIQUE_ID_BYTES)
        self.assertEqual(ctypes.sizeof(_abi.UniqueIdStruct), _abi.UNIQUE_ID_BYTES)
        self.assertEqual(self.define("RCOLL_SPLIT_NOCOLOR"), _abi.SPLIT_NOCOLOR)
        self.assertEqual(self.define("RCOLL_SHRINK_DEFAULT"), _abi.SHRINK_DEFAULT)
        self.assertEqual(self.define("RCOLL_SHRINK_ABORT"), _abi.SHRINK_ABORT)
        self.assertEqual(self.define("RCOLL_REVOKE_DEFAULT"), _abi.REVOKE_DEFAULT)
        self.assertEqual(self.define("RCOLL_CONFIG_MAGIC"), _abi.CONFIG_MAGIC)

    def test_config_fields(self):
        m = re.search(r"typedef struct \{([^{}]*)\}\s*rcollConfig_t;", self.text, re.S)
        names = re.findall(r"(\w+);", re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S))
        self.assertEqual(names, [f[0] for f in _abi.ConfigStruct._fields_])

    def test_library_matches(self):
        import rcoll
        self.assertEqual(rcoll.library_version(), _abi.VERSION)
        for name in _abi.RESULTS:
            self.assertTrue(rcoll._lib.lib.rcollGetErrorString(_abi.RESULTS[name]))


if __name__ == "__main__":
    unittest.main()
