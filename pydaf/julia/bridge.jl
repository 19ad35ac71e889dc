# pydaf's side of the juliacall bridge (pydaf/julia/handoff.py), included once into a module of its own by
# pydaf.julia.setup.start_julia. It builds Julia Daf data sets over numpy buffers without copying them, opens stored
# data sets by path, and returns what a Julia Daf holds in the forms pydaf stores (dense arrays, the parts of sparse
# arrays, lists of strings), without copying numbers either. Functions ending with `!` are called from Python as
# `name_b` (juliacall's spelling).

using DataAxesFormats
using PythonCall
using SparseArrays

import NamedArrays

const STORAGE_TYPES = Dict{String, DataType}(
    "Bool" => Bool,
    "Int8" => Int8,
    "Int16" => Int16,
    "Int32" => Int32,
    "Int64" => Int64,
    "UInt8" => UInt8,
    "UInt16" => UInt16,
    "UInt32" => UInt32,
    "UInt64" => UInt64,
    "Float32" => Float32,
    "Float64" => Float64,
)

"""
    keep_owner_alive!(array::Array, owner)::Nothing

Keep the Python object `owner` (which owns the memory `array` wraps: a numpy buffer, possibly a file map) alive as long
as Julia can reach that memory. A finalizer closure holds `owner`, one per array, by identity (a `WeakKeyDict` would
compare arrays by their values, so two equal buffers would share one entry and the first owner would be dropped). The
finalizer is attached to the array's `Memory`, not to the `Array`: since Julia 1.11 `reshape`, `vec` and the like
make new `Array`s over the same `Memory`, which outlive the first `Array` (JuliaLang/julia#54985).
"""
function keep_owner_alive!(array::Array, owner::Any)::Nothing
    memory = getfield(array, :ref).mem
    finalizer(memory) do _
        release_owner(owner)  # (the closure holds `owner` until `memory` is collected)
        return nothing
    end
    return nothing
end

release_owner(::Any)::Nothing = nothing  # dropping the last reference is all PythonCall needs to release it

"""
    wrap_buffer(owner, address, type_name, dims)::Array

A Julia `Array` over the `dims` (column-major) elements of type `type_name` at `address`, owned by the Python object
`owner` (a numpy array), without copying them.
"""
function wrap_buffer(owner::Any, address::Integer, type_name::AbstractString, dims::Tuple)::Array
    element_type = STORAGE_TYPES[type_name]
    shape = Tuple(Int(extent) for extent in dims)
    array = unsafe_wrap(Array, Ptr{element_type}(UInt(address)), shape; own = false)
    keep_owner_alive!(array, owner)
    return array
end

function julia_strings(values::Any)::Vector{String}
    return String[value isa AbstractString ? String(value) : pyconvert(String, value) for value in values]
end

function typed_scalar(value::Any, type_name::AbstractString)::StorageScalar
    if type_name == "String"
        return value isa AbstractString ? String(value) : pyconvert(String, value)
    end
    element_type = STORAGE_TYPES[type_name]
    return value isa Py ? pyconvert(element_type, value) : convert(element_type, value)
end

# Building a Julia data set from pydaf's (to_julia), or writing through from_julia.

function new_memory_daf(name::AbstractString)::MemoryDaf
    daf = MemoryDaf(; name = name)
    # `MemoryDaf` passes the name through `unique_name`, which renames a second data set of the same name (without a
    # `!`) to `name#2`; a hand-off keeps the name pydaf gave (the `name` field of the mutable `MemoryDaf`).
    daf.name = String(name)
    return daf
end

function open_stored(constructor::AbstractString, path::AbstractString, name::AbstractString)::DafReader
    open_format = getfield(DataAxesFormats, Symbol(constructor))
    return read_only(open_format(path, "r"); name = name)
end

function set_typed_scalar!(daf::DafWriter, name::AbstractString, value::Any, type_name::AbstractString)::Nothing
    set_scalar!(daf, name, typed_scalar(value, type_name))
    return nothing
end

function add_string_axis!(daf::DafWriter, axis::AbstractString, entries::Any)::Nothing
    add_axis!(daf, axis, julia_strings(entries))
    return nothing
end

# The values of vectors and matrices (their numbers wrapped by wrap_buffer), which Python then stores with
# `set_vector!` or `set_matrix!(...; relayout = false)`.

function string_matrix(values::Any, n_rows::Integer, n_columns::Integer)::Matrix{String}
    return reshape(julia_strings(values), Int(n_rows), Int(n_columns))
end

function sparse_vector(n_elements::Integer, nzind::Vector, nzval::Vector)::SparseVector
    return SparseVector(Int(n_elements), nzind, nzval)
end

function sparse_matrix(
    n_rows::Integer,
    n_columns::Integer,
    colptr::Vector,
    rowval::Vector,
    nzval::Vector,
)::SparseMatrixCSC
    return SparseMatrixCSC(Int(n_rows), Int(n_columns), colptr, rowval, nzval)
end

# A vector or matrix filled with one value, whose type a Python number would lose on the way.

function set_filled_vector!(
    daf::DafWriter,
    axis::AbstractString,
    name::AbstractString,
    value::Any,
    type::AbstractString,
)::Nothing
    set_vector!(daf, axis, name, typed_scalar(value, type))
    return nothing
end

function set_filled_matrix!(
    daf::DafWriter,
    rows::AbstractString,
    columns::AbstractString,
    name::AbstractString,
    value::Any,
    type::AbstractString,
)::Nothing
    set_matrix!(daf, rows, columns, name, typed_scalar(value, type); relayout = false)
    return nothing
end

# Reading a Julia data set as pydaf does (from_julia, julia_query).

function is_writer(daf::DafReader)::Bool
    return daf isa DafWriter
end

function julia_type_name(daf::DafReader)::String
    return string(nameof(typeof(daf)))
end

function daf_name(daf::DafReader)::String
    return String(daf.name)
end

function daf_path(daf::DafReader)::Union{String, Nothing}
    path = DataAxesFormats.Readers.complete_path(daf)
    return path === nothing ? nothing : String(path)
end

function sorted_names(names::Any)::Py
    return pylist(sort!(String[String(name) for name in names]))
end

function scalar_names(daf::DafReader)::Py
    return sorted_names(scalars_set(daf))
end

function axis_names(daf::DafReader)::Py
    return sorted_names(axes_set(daf))
end

function vector_names(daf::DafReader, axis::AbstractString)::Py
    return sorted_names(vectors_set(daf, axis))
end

function scalar_form(value::AbstractString)::Tuple
    return (String(value), "String")
end

function scalar_form(value::Real)::Tuple
    return (value, string(typeof(value)))
end

function typed_scalar_of(daf::DafReader, name::AbstractString)::Tuple
    return scalar_form(get_scalar(daf, name))
end

function axis_entries_of(daf::DafReader, axis::AbstractString)::Py
    return pylist(String[String(entry) for entry in axis_vector(daf, axis)])
end

"""
    stored_matrix_names(daf, rows_axis, columns_axis)::Vector{String}

The names of the matrices `daf` stores in this layout. `matrices_set(...; relayout = false)` also lists a layout
computed earlier and still cached (DataAxesFormats 0.3.0, `readers.jl`); `has_matrix(...; relayout = false)` asks the
storage only.
"""
function stored_matrix_names(daf::DafReader, rows_axis::AbstractString, columns_axis::AbstractString)::Vector{String}
    stored = String[]
    for name in matrices_set(daf, rows_axis, columns_axis; relayout = false, tensors = false)
        if has_matrix(daf, rows_axis, columns_axis, name; relayout = false)
            push!(stored, String(name))
        end
    end
    return sort!(stored)
end

function stored_matrices_set(daf::DafReader, rows_axis::AbstractString, columns_axis::AbstractString)::Py
    return pylist(stored_matrix_names(daf, rows_axis, columns_axis))
end

function unwrapped(array::AbstractArray)::AbstractArray
    while array isa NamedArrays.NamedArray || array isa SparseArrays.ReadOnly
        array = parent(array)
    end
    return array
end

"""
    stored_form(array)::Tuple

An array as pydaf stores it: `("dense", copied, size, array::Array)`, `("sparse", copied, size, nzind, nzval)` or
`("sparse", copied, size, colptr, rowval, nzval)` (1-based, as stored), or `("strings", true, size, values)` (a Python
list, column-major). `copied` says whether the numbers had to be copied (for arrays that are not plain `Array`s, such
as packed data or lazy sparse matrices); otherwise Python views Julia's memory.
"""
function stored_form(array::AbstractArray)::Tuple
    array = unwrapped(array)
    if eltype(array) <: AbstractString
        return ("strings", true, size(array), pylist(String[String(value) for value in vec(array)]))
    end
    copied = false
    if issparse(array) && ndims(array) == 1
        if !(array isa SparseVector)
            array = SparseVector(array)
            copied = true
        end
        return ("sparse", copied, size(array), SparseArrays.nonzeroinds(array), SparseArrays.nonzeros(array))
    elseif issparse(array)
        if !(array isa SparseMatrixCSC)
            array = SparseMatrixCSC(array)
            copied = true
        end
        return (
            "sparse",
            copied,
            size(array),
            SparseArrays.getcolptr(array),
            SparseArrays.rowvals(array),
            SparseArrays.nonzeros(array),
        )
    end
    if !(array isa Array)
        array = Array(array)
        copied = true
    end
    return ("dense", copied, size(array), array)
end

function stored_vector_form(daf::DafReader, axis::AbstractString, name::AbstractString)::Tuple
    return stored_form(get_vector(daf, axis, name))
end

function stored_matrix_form(
    daf::DafReader,
    rows_axis::AbstractString,
    columns_axis::AbstractString,
    name::AbstractString,
)::Tuple
    # `get_matrix(...; relayout = false)` would also return a layout computed earlier and cached: only what is stored.
    if !has_matrix(daf, rows_axis, columns_axis, name; relayout = false)
        error(chomp("""
              missing matrix: $(name)
              for the rows axis: $(rows_axis)
              and the columns axis: $(columns_axis)
              in the daf data: $(daf.name)
              """))
    end
    return stored_form(get_matrix(daf, rows_axis, columns_axis, name; relayout = false))
end

function dimension_name(array::NamedArrays.NamedArray, dimension::Integer)::Union{String, Nothing}
    name = NamedArrays.dimnames(array, dimension)
    if name isa Symbol && String(name) in ("A", "B")  # NamedArrays' defaults: the entries are not an axis
        return nothing
    end
    return String(name)
end

function entry_names(array::NamedArrays.NamedArray, dimension::Integer)::Py
    return pylist(String[String(name) for name in names(array, dimension)])
end

"""
    result_form(result)::Tuple

A query result as pydaf returns it: `("names", sorted names)`, `("scalar", value, type name)`,
`("vector", dimension name, entry names, stored_form...)` or
`("matrix", rows dimension name, columns dimension name, row names, column names, stored_form...)`; a dimension name
is `nothing` where the entries are not an axis.
"""
function result_form(result::Any)::Tuple
    if result isa AbstractSet
        return ("names", sorted_names(result))
    elseif result isa AbstractString || result isa Real
        return ("scalar", scalar_form(result)...)
    elseif result isa NamedArrays.NamedArray && ndims(result) == 1
        return ("vector", dimension_name(result, 1), entry_names(result, 1), stored_form(result)...)
    elseif result isa NamedArrays.NamedArray && ndims(result) == 2
        return (
            "matrix",
            dimension_name(result, 1),
            dimension_name(result, 2),
            entry_names(result, 1),
            entry_names(result, 2),
            stored_form(result)...,
        )
    else
        error("unexpected query result type: $(typeof(result))")
    end
end

function query_form(daf::DafReader, query::AbstractString)::Tuple
    return result_form(get_query(daf, query; cache = false))
end

"""
    data_addresses(array)::Tuple

The addresses of the numbers of an array (e.g. what `get_vector` returns) as stored: `(values,)`, `(nzind, nzval)` or
`(colptr, rowval, nzval)`, for checking that both languages see the same memory.
"""
function data_addresses(array::AbstractArray)::Tuple
    array = unwrapped(array)
    if array isa SparseVector
        return (UInt(pointer(SparseArrays.nonzeroinds(array))), UInt(pointer(SparseArrays.nonzeros(array))))
    elseif array isa SparseMatrixCSC
        return (
            UInt(pointer(SparseArrays.getcolptr(array))),
            UInt(pointer(SparseArrays.rowvals(array))),
            UInt(pointer(SparseArrays.nonzeros(array))),
        )
    else
        return (UInt(pointer(array)),)
    end
end
