"""The binding's copy of the ABI (python/rcoll/_abi.py) against include/rcoll.h."""
import ctypes
import os
import re
import unittest

from rcoll import _abi, _lib

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "include", "rcoll.h")


def header_text():
    with open(HEADER) as f:
        return f.read()


def enum_body(text, typedef):
    m = re.search(r"typedef enum \{([^{}]*)\}\s*%s;" % typedef, text, re.S)
    assert m, "no enum %s in rcoll.h" % typedef
    return dict((k, int(v, 0))
                for k, v in re.findall(r"(rcoll\w+)\s*=\s*(-?(?:0x[0-9a-fA-F]+|\d+))", m.group(1)))


# Header functions the binding leaves out on purpose, each with the reason.
NOT_BOUND = {
    "rcollCommInitRank": "rcollCommInitRankConfig does the same with a config",
    "rcollCommInitAll": "several ranks in one process: not a Python use (one rank per process)",
    "rcollBcast": "legacy in-place broadcast: Communicator.broadcast(x) is in place",
    "rcollCommFinalize": "destroy() finalizes",
}

_CT = ctypes
# A parameter's C type (const and spacing removed) -> the ctypes type the prototype must have.
C_TO_CTYPES = {
    "rcollResult_t": _CT.c_int, "rcollDataType_t": _CT.c_int, "rcollRedOp_t": _CT.c_int,
    "rcollScalarResidence_t": _CT.c_int, "int": _CT.c_int, "size_t": _CT.c_size_t,
    "rcollComm_t": _CT.c_void_p, "rcollStream_t": _CT.c_void_p, "void*": _CT.c_void_p,
    "char*": _CT.c_char_p,
    "int*": _CT.POINTER(_CT.c_int), "rcollResult_t*": _CT.POINTER(_CT.c_int),
    "rcollRedOp_t*": _CT.POINTER(_CT.c_int), "size_t*": _CT.POINTER(_CT.c_size_t),
    "void**": _CT.POINTER(_CT.c_void_p), "rcollComm_t*": _CT.POINTER(_CT.c_void_p),
    "rcollUniqueId": _abi.UniqueIdStruct, "rcollUniqueId*": _CT.POINTER(_abi.UniqueIdStruct),
    "rcollConfig_t*": _CT.POINTER(_abi.ConfigStruct),
    "rcollSimInfo_t*": _CT.POINTER(_abi.SimInfoStruct),
}


def prototypes(text):
    """{name: (return C type, [parameter C types])} of every RCOLL_API function."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = {}
    for ret, name, params in re.findall(r"RCOLL_API\s+([\w\s\*]+?)\s*\b(rcoll\w+)\s*\(([^)]*)\)\s*;", text):
        types = []
        for p in params.split(","):
            p = p.strip()
            if p in ("void", ""):
                continue
            p = re.sub(r"\bconst\b", "", p)
            m = re.match(r"(.*?)(\w+)\s*$", p, re.S)  # the last word is the name
            types.append(re.sub(r"\s+", "", m.group(1)))
        out[name] = (re.sub(r"\s+", "", re.sub(r"\bconst\b", "", ret)), types)
    return out


def struct_fields(text, typedef):
    m = re.search(r"typedef struct \{([^{}]*)\}\s*%s;" % typedef, text, re.S)
    assert m, "no struct %s in rcoll.h" % typedef
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    return [(re.sub(r"\s+", " ", t.replace("const", "")).strip(), n)
            for t, n in re.findall(r"([\w\s\*]+?)\s*\b(\w+)\s*;", body)]


C_FIELD = {"size_t": _CT.c_size_t, "unsigned": _CT.c_uint, "int": _CT.c_int, "float": _CT.c_float,
           "char *": _CT.c_char_p}


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

    def check_struct(self, typedef, cls):
        """Same fields, in the same order, of the same C types."""
        fields = struct_fields(self.text, typedef)
        self.assertEqual([n for _, n in fields], [f[0] for f in cls._fields_], typedef)
        for (ctype, name), (_, pytype) in zip(fields, cls._fields_):
            self.assertIn(ctype, C_FIELD, "%s.%s: no ctypes equivalent of %s known" % (typedef, name, ctype))
            self.assertIs(C_FIELD[ctype], pytype, "%s.%s is %s in rcoll.h" % (typedef, name, ctype))

    def test_struct_layouts(self):
        self.check_struct("rcollConfig_t", _abi.ConfigStruct)
        self.check_struct("rcollSimInfo_t", _abi.SimInfoStruct)

    def test_sim_info(self):
        self.assertEqual(self.define("RCOLL_SIM_INFO_MAGIC"), _abi.SIM_INFO_MAGIC)
        m = re.search(r"#define\s+RCOLL_UNDEF_FLOAT\s+(\S+)", self.text)
        self.assertEqual(float(m.group(1).rstrip("f")), _abi.UNDEF_FLOAT)
        s = _abi.SimInfoStruct.make()  # RCOLL_SIM_INFO_INITIALIZER's order: size, magic, version, time
        m = re.search(r"#define RCOLL_SIM_INFO_INITIALIZER\s*\\?\s*\{([^}]*)\}", self.text)
        self.assertEqual([x.strip() for x in m.group(1).split(",")],
                         ["sizeof(rcollSimInfo_t)", "RCOLL_SIM_INFO_MAGIC", "RCOLL_VERSION_CODE",
                          "RCOLL_UNDEF_FLOAT"])
        self.assertEqual((s.size, s.magic, s.version, s.estimatedTime),
                         (ctypes.sizeof(_abi.SimInfoStruct), _abi.SIM_INFO_MAGIC, _abi.VERSION_CODE,
                          _abi.UNDEF_FLOAT))

    def test_scalar_residence(self):
        self.assertEqual(enum_body(self.text, "rcollScalarResidence_t"), _abi.SCALAR_RESIDENCES)

    def test_every_function_is_bound_or_excused(self):
        protos = prototypes(self.text)
        self.assertGreater(len(protos), 40)  # the parser found them
        missing = sorted(set(protos) - set(_lib._PROTOS) - set(NOT_BOUND))
        self.assertEqual(missing, [], "functions of rcoll.h the binding lacks (bind them in "
                         "python/rcoll/_lib.py, or list them in NOT_BOUND with the reason)")
        self.assertEqual(sorted(set(_lib._PROTOS) - set(protos)), [], "bound but not in rcoll.h")
        self.assertEqual(sorted(set(NOT_BOUND) - set(protos)), [], "excused but not in rcoll.h")

    def test_prototypes_match(self):
        """Each bound function's ctypes prototype has the header's parameters:
        as many, each of the matching ctypes type, and the same result type."""
        protos = prototypes(self.text)
        for name, (res, args) in _lib._PROTOS.items():
            cret, cargs = protos[name]
            self.assertEqual(len(args), len(cargs), "%s: %d parameters in rcoll.h, %d bound"
                             % (name, len(cargs), len(args)))
            self.assertIs(C_TO_CTYPES.get(cret), res, "%s returns %s" % (name, cret))
            for i, (ct, py) in enumerate(zip(cargs, args)):
                self.assertIn(ct, C_TO_CTYPES, "%s parameter %d: no ctypes equivalent of %s known"
                              % (name, i, ct))
                want = C_TO_CTYPES[ct]
                self.assertIs(py, want, "%s parameter %d is %s in rcoll.h; bound as %s" % (name, i, ct, py))

    def test_library_matches(self):
        import rcoll
        self.assertEqual(rcoll.library_version(), _abi.VERSION)
        for name in _abi.RESULTS:
            self.assertTrue(rcoll._lib.lib.rcollGetErrorString(_abi.RESULTS[name]))


if __name__ == "__main__":
    unittest.main()
