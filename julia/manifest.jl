# The manifest of a Daf data set, computed exactly as pydaf computes it (pydaf/manifest.py documents the format and the
# hash), so julia/verify.jl can check a data set against the manifest pydaf wrote for it, and pydaf's tests can check the
# data sets julia/make_fixtures.jl writes against the manifests written here. Included by those scripts (and by pydaf's
# tests into the juliacall bridge).
#
# The hash of a value is the SHA-256 of: the header "daf-manifest-1 <kind> <eltype> <dims>\n"; then strings as their
# UTF-8 bytes each followed by 0xFF, a number scalar as its little-endian bytes, and a number vector or matrix as
# (0-based column-major position as a little-endian UInt64, little-endian value) for every value != 0, in column-major
# (stored, for sparse data) order.
#
# `manifest_text` writes the manifest byte for byte as `pydaf manifest` does (`pydaf.manifest.manifest_json`: Python's
# `json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False)` and a newline; a float scalar's `value` as
# Python's `repr` of the Float64), so the two files can be compared with `cmp`. What the tools compare is the parsed
# content (`manifest_differences`), never the text.

using DataAxesFormats
using JSON
using SHA
using SparseArrays

import NamedArrays

@assert ENDIAN_BOM == 0x04030201  # `write` writes little-endian bytes on this machine, which the hash is over

const MANIFEST_VERSION = 1
const MANIFEST_SEPARATOR = 0xff  # never occurs in UTF-8
const MANIFEST_CHUNK_BYTES = 1 << 24
const MANIFEST_SECTIONS = ("scalars" => 1, "axes" => 1, "vectors" => 2, "matrices" => 3)
const MANIFEST_FIELDS = ("eltype", "length", "shape", "nnz", "hash")

function manifest_eltype(element_type::Type)::String
    return element_type <: AbstractString ? "String" : string(element_type)
end

function manifest_array(array::AbstractArray)::AbstractArray
    while array isa NamedArrays.NamedArray || array isa SparseArrays.ReadOnly
        array = parent(array)
    end
    if issparse(array) && !(array isa SparseVector || array isa SparseMatrixCSC)  # e.g. lazy sparse (packed) data
        array = ndims(array) == 1 ? SparseVector(array) : SparseMatrixCSC(array)
    end
    return array
end

# The bytes to hash go to `buffer`, which is hashed every MANIFEST_CHUNK_BYTES, so no array is ever copied whole.
struct ManifestHasher
    context::SHA.SHA256_CTX
    buffer::IOBuffer
end

function ManifestHasher(kind::AbstractString, element_type::Type, dims::Tuple)::ManifestHasher
    hasher = ManifestHasher(SHA.SHA256_CTX(), IOBuffer())
    write(hasher.buffer, "daf-manifest-$(MANIFEST_VERSION) $(kind) $(manifest_eltype(element_type)) $(join(dims, ","))\n")
    return hasher
end

function flush_hasher!(hasher::ManifestHasher; force::Bool = false)::Nothing
    if force || position(hasher.buffer) >= MANIFEST_CHUNK_BYTES
        SHA.update!(hasher.context, take!(hasher.buffer))
    end
    return nothing
end

function finish_hasher!(hasher::ManifestHasher)::String
    flush_hasher!(hasher; force = true)
    return bytes2hex(SHA.digest!(hasher.context))
end

function hash_string!(hasher::ManifestHasher, value::AbstractString)::Nothing
    write(hasher.buffer, codeunits(value))
    write(hasher.buffer, MANIFEST_SEPARATOR)
    flush_hasher!(hasher)
    return nothing
end

function hash_entry!(hasher::ManifestHasher, position::Integer, value::Real)::Nothing
    if value != 0  # -0.0 is a zero, NaN is not
        write(hasher.buffer, UInt64(position))
        write(hasher.buffer, value)
    end
    return nothing
end

function manifest_scalar_hash(value::StorageScalar)::String
    hasher = ManifestHasher("scalar", typeof(value), ())
    if value isa AbstractString
        hash_string!(hasher, value)
    else
        write(hasher.buffer, value)
    end
    return finish_hasher!(hasher)
end

function manifest_axis_hash(entries::AbstractVector{<:AbstractString})::String
    hasher = ManifestHasher("axis", String, (length(entries),))
    for entry in entries
        hash_string!(hasher, entry)
    end
    return finish_hasher!(hasher)
end

function manifest_array_hash(kind::AbstractString, array::AbstractArray)::String
    array = manifest_array(array)
    hasher = ManifestHasher(kind, eltype(array), size(array))
    if eltype(array) <: AbstractString
        for value in array  # column-major
            hash_string!(hasher, value)
        end
    elseif array isa SparseVector
        for (index, value) in zip(SparseArrays.nonzeroinds(array), SparseArrays.nonzeros(array))
            hash_entry!(hasher, Int(index) - 1, value)
            flush_hasher!(hasher)
        end
    elseif array isa SparseMatrixCSC
        n_rows = size(array, 1)
        colptr = SparseArrays.getcolptr(array)
        rowval = SparseArrays.rowvals(array)
        nzval = SparseArrays.nonzeros(array)
        for column in 1:size(array, 2)
            for entry in Int(colptr[column]):(Int(colptr[column + 1]) - 1)
                hash_entry!(hasher, Int(rowval[entry]) - 1 + (column - 1) * n_rows, nzval[entry])
            end
            flush_hasher!(hasher)
        end
    else
        for (position, value) in enumerate(array)  # linear indices are column-major
            hash_entry!(hasher, position - 1, value)
            if position % 65536 == 0
                flush_hasher!(hasher)
            end
        end
    end
    return finish_hasher!(hasher)
end

function manifest_nnz(array::AbstractArray)::Int
    if eltype(array) <: AbstractString
        return count(!isempty, array)
    elseif issparse(array)
        return count(!iszero, SparseArrays.nonzeros(array))
    else
        return count(!iszero, array)
    end
end

function manifest_shown(value::AbstractString)::String
    return String(value)
end

function manifest_shown(value::Integer)::Integer  # Bool included
    return value
end

function manifest_shown(value::AbstractFloat)::String  # for people only: compared by hash
    return python_float_text(Float64(value))
end

"""
    python_float_text(value::Float64)::String

The text Python's `repr` gives a float (`NaN`, `Inf` and `-Inf` as pydaf's manifest writes them). Julia's `repr` and
Python's both write the shortest digits that read back as the same Float64 (Ryu; David Gay's `dtoa`, mode 0); only
the layout differs: Python writes `d.ddde±XX` (at least two exponent digits) when the decimal point is more than 16
digits right or 4 digits left of the first digit, else plain digits with at least one after the point.
"""
function python_float_text(value::Float64)::String
    if isnan(value)
        return "NaN"
    elseif isinf(value)
        return value > 0 ? "Inf" : "-Inf"
    end
    text = repr(value)  # e.g. "-1.5e-5", "0.1", "1.0e16", "123.0"
    sign = startswith(text, "-") ? "-" : ""
    text = text[(length(sign) + 1):end]
    mantissa, exponent = occursin('e', text) ? split(text, 'e') : (text, "0")
    integer_part, fraction_part = occursin('.', mantissa) ? split(mantissa, '.') : (mantissa, "")
    all_digits = integer_part * fraction_part
    significant = lstrip(all_digits, '0')
    # The value is 0.DIGITS × 10^point (Python's `decpt`).
    point = length(integer_part) + parse(Int, exponent) - (length(all_digits) - length(significant))
    digits = rstrip(significant, '0')
    if isempty(digits)
        return sign * "0.0"
    elseif -4 < point <= 16
        if point <= 0
            return sign * "0." * "0"^(-point) * digits
        elseif point >= length(digits)
            return sign * digits * "0"^(point - length(digits)) * ".0"
        else
            return sign * digits[1:point] * "." * digits[(point + 1):end]
        end
    end
    decimal_exponent = point - 1
    shown_mantissa = length(digits) == 1 ? digits : digits[1:1] * "." * digits[2:end]
    exponent_sign = decimal_exponent < 0 ? "-" : "+"
    return sign * shown_mantissa * "e" * exponent_sign * lpad(string(abs(decimal_exponent)), 2, '0')
end

# Floats (as Julia parses them) and Python's `repr` of each: `check_python_float_text` checks `python_float_text`
# against them in Julia, and tests/test_julia_kit.py checks them against pydaf's manifest in Python.
const PYTHON_FLOAT_TEXTS = (
    "0.0" => "0.0",
    "-0.0" => "-0.0",
    "0.25" => "0.25",
    "0.1" => "0.1",
    "-2.5" => "-2.5",
    "3.0" => "3.0",
    "123.456" => "123.456",
    "3.141592653589793" => "3.141592653589793",
    "0.10000000149011612" => "0.10000000149011612",
    "0.0001" => "0.0001",
    "0.00012345" => "0.00012345",
    "1.0e-5" => "1e-05",
    "-1.5e-5" => "-1.5e-05",
    "1.0e15" => "1000000000000000.0",
    "1.2345e15" => "1234500000000000.0",
    "1.0e16" => "1e+16",
    "1.2345e16" => "1.2345e+16",
    "1.0e22" => "1e+22",
    "1.152921504606847e18" => "1.152921504606847e+18",
    "1.7976931348623157e308" => "1.7976931348623157e+308",
    "5.0e-324" => "5e-324",
    "2.2250738585072014e-308" => "2.2250738585072014e-308",
    "Inf" => "Inf",
    "-Inf" => "-Inf",
    "NaN" => "NaN",
)

function check_python_float_text()::Nothing
    for (literal, expected) in PYTHON_FLOAT_TEXTS
        actual = python_float_text(parse(Float64, literal))
        if actual != expected
            error("python_float_text($(literal)) is: $(actual)\nnot Python's repr: $(expected)")
        end
    end
    return nothing
end

function manifest_array_entry(kind::AbstractString, array::AbstractArray)::Dict{String, Any}
    array = manifest_array(array)
    is_sparse = !(eltype(array) <: AbstractString) && issparse(array)
    entry = Dict{String, Any}(
        "eltype" => manifest_eltype(eltype(array)),
        "storage" => is_sparse ? "sparse" : "dense",
        "nnz" => manifest_nnz(array),
        "hash" => manifest_array_hash(kind, array),
    )
    if kind == "vector"
        entry["length"] = length(array)
    else
        entry["shape"] = collect(size(array))
    end
    return entry
end

# The matrices `daf` stores in this layout: `matrices_set(...; relayout = false)` of DataAxesFormats 0.3.0 also lists a
# layout computed earlier and still cached (`readers.jl`, `matrices_set`), which `has_matrix(...; relayout = false)`
# (the storage only) leaves out.
function manifest_matrix_names(daf::DafReader, rows_axis::AbstractString, columns_axis::AbstractString)::Vector{String}
    names = String[]
    for name in matrices_set(daf, rows_axis, columns_axis; relayout = false, tensors = false)
        if has_matrix(daf, rows_axis, columns_axis, name; relayout = false)
            push!(names, String(name))
        end
    end
    return sort!(names)
end

"""
    manifest_of(daf::DafReader)::Dict{String, Any}

The manifest of a data set, as `pydaf manifest` writes it (see pydaf/manifest.py).
"""
function manifest_of(daf::DafReader)::Dict{String, Any}
    scalars = Dict{String, Any}()
    for name in scalars_set(daf)
        value = get_scalar(daf, name)
        scalars[String(name)] = Dict{String, Any}(
            "eltype" => manifest_eltype(typeof(value)),
            "value" => manifest_shown(value),
            "hash" => manifest_scalar_hash(value),
        )
    end
    axes_names = sort!([String(axis) for axis in axes_set(daf)])
    axes = Dict{String, Any}()
    vectors = Dict{String, Any}()
    matrices = Dict{String, Any}()
    for axis in axes_names
        entries = axis_vector(daf, axis)
        axes[axis] = Dict{String, Any}("length" => length(entries), "hash" => manifest_axis_hash(entries))
        vectors[axis] = Dict{String, Any}(
            String(name) => manifest_array_entry("vector", get_vector(daf, axis, name)) for
            name in vectors_set(daf, axis)
        )
        matrices[axis] = Dict{String, Any}()
    end
    for rows_axis in axes_names
        for columns_axis in axes_names
            matrices[rows_axis][columns_axis] = Dict{String, Any}(
                name =>
                    manifest_array_entry("matrix", get_matrix(daf, rows_axis, columns_axis, name; relayout = false))
                for name in manifest_matrix_names(daf, rows_axis, columns_axis)
            )
        end
    end
    return Dict{String, Any}(
        "manifest" => "daf-manifest",
        "version" => MANIFEST_VERSION,
        "name" => String(daf.name),
        "scalars" => scalars,
        "axes" => axes,
        "vectors" => vectors,
        "matrices" => matrices,
    )
end

"""
    manifest_text(daf::DafReader)::String

The manifest of a data set as `pydaf manifest` writes it, byte for byte (see the top of this file).
"""
function manifest_text(daf::DafReader)::String
    return manifest_json(manifest_of(daf))
end

function manifest_json(manifest::AbstractDict)::String
    io = IOBuffer()
    write_manifest_json(io, manifest, 0)
    write(io, '\n')
    return String(take!(io))
end

# Python's `json.dumps(..., indent=1, sort_keys=True, ensure_ascii=False)`: one entry per line, indented one space per
# level, `"key": value` (keys sorted by code point, as Julia sorts `String`s), `,` ending all but the last entry.
function write_manifest_json(io::IO, value::AbstractDict, level::Integer)::Nothing
    if isempty(value)
        print(io, "{}")
        return nothing
    end
    print(io, "{")
    entries = sort!([String(key) => child for (key, child) in value]; by = first)
    for (index, (key, child)) in enumerate(entries)
        print(io, index == 1 ? "\n" : ",\n", " "^(level + 1))
        write_manifest_json(io, key, level + 1)
        print(io, ": ")
        write_manifest_json(io, child, level + 1)
    end
    print(io, "\n", " "^level, "}")
    return nothing
end

function write_manifest_json(io::IO, value::AbstractVector, level::Integer)::Nothing
    if isempty(value)
        print(io, "[]")
        return nothing
    end
    print(io, "[")
    for (index, child) in enumerate(value)
        print(io, index == 1 ? "\n" : ",\n", " "^(level + 1))
        write_manifest_json(io, child, level + 1)
    end
    print(io, "\n", " "^level, "]")
    return nothing
end

function write_manifest_json(io::IO, value::Integer, ::Integer)::Nothing  # Bool included: `true`, `false`
    print(io, string(value))
    return nothing
end

# Python's escapes without `ensure_ascii`: `"`, `\`, and the control characters below U+0020 (`\n`, `\r`, `\t`, `\b`,
# `\f`, else `\u00xx`, lowercase); everything else is written as its UTF-8 bytes.
function write_manifest_json(io::IO, value::AbstractString, ::Integer)::Nothing
    print(io, '"')
    for character in value
        if character == '"'
            print(io, "\\\"")
        elseif character == '\\'
            print(io, "\\\\")
        elseif character == '\n'
            print(io, "\\n")
        elseif character == '\r'
            print(io, "\\r")
        elseif character == '\t'
            print(io, "\\t")
        elseif character == '\x08'
            print(io, "\\b")
        elseif character == '\x0c'
            print(io, "\\f")
        elseif character < ' '
            print(io, "\\u", string(UInt32(character); base = 16, pad = 4))
        else
            print(io, character)
        end
    end
    print(io, '"')
    return nothing
end

function flatten_manifest(manifest::AbstractDict, section::AbstractString, depth::Integer)::Dict{String, Any}
    flat = Dict{String, Any}()
    function walk(prefix::AbstractString, node::AbstractDict, level::Integer)::Nothing
        for (key, child) in node
            if level == depth
                flat["$(prefix)/$(key)"] = child
            else
                walk("$(prefix)/$(key)", child, level + 1)
            end
        end
        return nothing
    end
    walk(section, get(manifest, section, Dict{String, Any}()), 1)
    return flat
end

"""
    manifest_differences(expected, actual; storage = false)::Vector{String}

What differs between two (parsed) manifests, one line per property, as pydaf's `manifest_differences` says it (data set
names ignored; with `storage`, dense/sparse storage compared too; the same default as pydaf's).
"""
function manifest_differences(expected::AbstractDict, actual::AbstractDict; storage::Bool = false)::Vector{String}
    for manifest in (expected, actual)
        if get(manifest, "manifest", nothing) != "daf-manifest" || get(manifest, "version", nothing) != MANIFEST_VERSION
            error("not a version $(MANIFEST_VERSION) daf manifest")
        end
    end
    fields = storage ? (MANIFEST_FIELDS..., "storage") : MANIFEST_FIELDS
    differences = String[]
    for (section, depth) in MANIFEST_SECTIONS
        left = flatten_manifest(expected, section, depth)
        right = flatten_manifest(actual, section, depth)
        append!(differences, ["$(path): missing" for path in sort!(collect(setdiff(keys(left), keys(right))))])
        append!(differences, ["$(path): unexpected" for path in sort!(collect(setdiff(keys(right), keys(left))))])
        for path in sort!(collect(intersect(keys(left), keys(right))))
            for field in fields
                if get(left[path], field, nothing) != get(right[path], field, nothing)
                    push!(differences, "$(path): $(field) differs")
                end
            end
        end
    end
    return differences
end
